"""A Rust panic in either native module (the core, `stoker._native`; the media part,
`stoker._media.ffmpegN._media`) is a `stoker.errors.NativePanicError` naming the call, a
`StokerError` that ``except Exception`` and the failure policy catch, never pyo3's
``PanicException``, a ``BaseException`` that went past both and ended the job. Every entry point of
both modules runs under the one guard (src/core/panic_guard.rs), which the last test reads from the
source, so a new entry point cannot ship without it.

The real panic here: a decode pool that cannot start its threads (the process is at its limit of
threads; the pool's constructor panics). It is made real in a child process: as root, the child
becomes ``nobody`` (root's thread limit is not enforced), then lowers its limit to none.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

AT_THE_THREAD_LIMIT = """
    import os, resource, sys, threading
    try:
        if os.getuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        threading.Thread(target=lambda: None).start()
    except RuntimeError:
        pass  # at the limit: no thread starts
    except OSError as error:
        sys.exit(f"skip: cannot lower this process's thread limit ({error})")
    else:
        sys.exit("skip: the thread limit is not enforced here")
"""


def _child(code: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if done.returncode == 1 and done.stderr.startswith("skip: "):
        pytest.skip(done.stderr.strip())
    return done


def test_a_panic_in_the_core_is_a_native_panic_error() -> None:
    done = _child(f"""
        from stoker.errors import StokerError
        from stoker.ops import ImageTransform, decode_batch
        from stoker_testbed.data.images import jpeg

        images = [jpeg(32, 24, seed=seed) for seed in range(4)]
        transform = ImageTransform(resize=(8, 8))
        {textwrap.indent(textwrap.dedent(AT_THE_THREAD_LIMIT), " " * 8).strip()}
        try:
            decode_batch(images, transform, threads=3)
        except StokerError as error:
            print(type(error).__name__, "|", error)
    """)
    assert done.returncode == 0, done.stderr[-3000:]  # before: PanicException, no Exception
    assert done.stdout.startswith("NativePanicError | stoker's native code failed in decode_batch_into: starting decode threads"), (
        done.stdout
    )


def test_a_panic_in_the_media_part_is_a_native_panic_error() -> None:
    from stoker.errors import MediaUnavailableError
    from stoker.ops._media_backend import media_backend

    try:
        media_backend()
    except MediaUnavailableError as error:
        pytest.skip(str(error))
    done = _child(f"""
        from stoker.errors import StokerError
        from stoker.ops import AudioTransform, decode_batch
        from stoker_testbed.data.media_files import tone_with_clicks, wav_bytes

        wav = wav_bytes(tone_with_clicks(0.5, 16_000, 440.0, []), 16_000)
        transform = AudioTransform(sample_rate=16_000, samples=4_000, window="start")
        decode_batch([wav], transform)  # the media part loaded, with its libraries
        {textwrap.indent(textwrap.dedent(AT_THE_THREAD_LIMIT), " " * 8).strip()}
        try:
            decode_batch([wav] * 4, transform, threads=3)
        except StokerError as error:
            print(type(error).__name__, "|", error)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("NativePanicError | stoker's native code failed in decode_audio_batch_into: starting decode threads"), (
        done.stdout
    )


def test_lengths_that_wrap_around_past_2_64_are_refused_not_a_panic() -> None:
    # Their uint64 sum wrapped to the tokens' count (0), and the packer sliced past the end.
    import numpy as np

    from stoker import _native
    from stoker.errors import DecodeError
    from stoker.ops import SequencePacker

    lengths = np.array([2**64 - 1, 1], np.uint64)
    with pytest.raises(DecodeError, match=f"lengths add up to {2**64}, tokens holds 0"):
        SequencePacker(context_length=8, batch_size=1).add_many(np.zeros(0, np.uint32), lengths)
    with pytest.raises(ValueError, match="lengths add up to more than 2\\^64, tokens holds 0"):
        _native.TokenPacker(8).push_many(np.zeros(0, np.uint32), lengths, 0)


ENTRY = re.compile(r"^\s*(?:pub(?:\(crate\))? )?fn (\w+)")


def _entry_points(source: str) -> list[tuple[str, str]]:
    """(name, first line of the body) of every #[pyfunction] and every fn of a #[pymethods] impl."""
    lines = source.splitlines()
    found, pending, in_methods = [], False, False
    for number, line in enumerate(lines):
        if line.strip() == "#[pyfunction]":
            pending = True
        elif line.startswith("#[pymethods]"):
            in_methods = True
        elif in_methods and line.startswith("}"):
            in_methods = False
        match = ENTRY.match(line)
        if match and (pending or (in_methods and line.startswith("    fn "))):
            body = next(index for index in range(number, len(lines)) if lines[index].rstrip().endswith("{"))
            found.append((match.group(1), lines[body + 1].strip()))
            pending = False
    return found


def test_every_entry_point_of_both_modules_runs_under_the_guard() -> None:
    files = sorted((ROOT / "src" / "core" / "python").glob("*.rs")) + [ROOT / "src" / "media" / "python.rs"]
    entries = {f"{path.name}:{name}": first for path in files for name, first in _entry_points(path.read_text())}
    assert len(entries) > 40, sorted(entries)  # the scan finds them (both modules have dozens)
    unguarded = sorted(name for name, first in entries.items() if not first.startswith("guard("))
    assert not unguarded, f"entry points without the panic guard (stoker_native::panic_guard::guard): {unguarded}"
