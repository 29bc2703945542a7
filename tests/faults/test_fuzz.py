"""The fuzz suite: seeded, structure-aware mutations of every format stoker reads, each decoded in a
child process and judged. A case passes when it decodes, or fails with stoker's own error naming
the file (or the sample); it fails on a signal or an abort, a hang past `CASE_TIMEOUT`, an RSS
past `MAX_RSS_MB`, or any other exception.

Hypothesis draws the mutations (``tests/faults/fuzz/mutations.py``): it is a well-kept library
already used here, its strategies express the formats' structure (which fields to push to their
extremes), it is seeded (``derandomize`` in CI: every run tries the same cases) and it shrinks a
failure to its smallest input. Atheris and cargo-fuzz were the alternatives: coverage-guided and
stronger over hours, but Atheris has no wheel for this Python and cargo-fuzz needs a nightly
compiler, and neither judges a whole Python path (decode, storage, error naming) in a child.

A failing case is saved under ``tests/faults/fuzz/regressions/<format>/`` (the smallest one
Hypothesis found), and `test_saved_regressions_stay_fixed` runs every saved file from then on.
Inputs that are no file (a filter expression, a key list handed to ``exclude``) are drawn whole by
a strategy (``tests/faults/fuzz/operator_inputs.py``) and judged the same way.

Budget: ``STOKER_FUZZ_EXAMPLES`` cases per format (default 60, a few minutes in all), the same
cases each run, in the same order; a format whose cases are slow (Lance opens a dataset and its
runtime per case: 1.2 s each on a quiet machine, 5 s on a loaded one) stops drawing new ones after
``STOKER_FUZZ_SECONDS`` (default 30) and says how many it ran. ``make fuzz`` runs 2,000 per
format with fresh randomness and no time budget.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from .fuzz.mutations import JSON_KINDS, PARSERS, mutated
from .fuzz.operator_inputs import GENERATED
from .fuzz.seeds import Seed, make_seeds

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = Path(__file__).resolve().parent / "fuzz" / "regressions"
EXAMPLES = int(os.environ.get("STOKER_FUZZ_EXAMPLES", "60"))
SECONDS = float(os.environ.get("STOKER_FUZZ_SECONDS", "30"))  # make fuzz: 0, no budget
FRESH = os.environ.get("STOKER_FUZZ_FRESH") == "1"  # make fuzz: new randomness each run
CASE_TIMEOUT = 60.0  # seconds before a case counts as a hang (a bound on hangs, not a speed target)
MAX_RSS_MB = 1024  # a mutated file of a few KB must not take a GB


class Worker:
    """A long-lived worker process (``module``: ``tests.faults.fuzz.worker`` unless another
    target's child is named), replaced when a case kills it.

    Its stderr goes to a file, read when it dies: a pipe nobody drains fills up (a caught Rust
    panic still prints its report there) and would block the worker, a false hang."""

    def __init__(self, module: str = "tests.faults.fuzz.worker") -> None:
        self.module = module
        self.process: subprocess.Popen[str] | None = None
        self.stderr = tempfile.TemporaryFile()

    def _start(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            self.stderr.seek(0)
            self.stderr.truncate()
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.stderr,
                text=True,
            )
        return self.process

    def run(self, kind: str, path: Path, names: list[str]) -> dict:
        """The worker's answer for one case, or a failure record when it died or hung."""
        process = self._start()
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps({"format": kind, "path": str(path), "names": names}) + "\n")
        process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            ready = selector.select(CASE_TIMEOUT)
        if not ready:
            process.kill()
            process.wait()
            return {"outcome": "hang", "message": f"no answer in {CASE_TIMEOUT:.0f} s"}
        line = process.stdout.readline()
        if not line:
            code = process.wait()
            self.stderr.seek(0)
            stderr = self.stderr.read().decode(errors="replace")[-2000:]
            return {"outcome": "died", "message": f"exit status {code} (signal {-code if code < 0 else 'none'}): {stderr}"}
        return json.loads(line)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)
        self.stderr.close()


@pytest.fixture(scope="module")
def worker() -> object:
    started = Worker()
    yield started
    started.close()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Seed]:
    return make_seeds(tmp_path_factory.mktemp("fuzz-seeds"))


def _verdict(answer: dict) -> str | None:
    """Why this answer fails the suite, or None."""
    if answer["outcome"] in ("hang", "died"):
        return f"{answer['outcome']}: {answer['message']}"
    if answer.get("rss_mb", 0) > MAX_RSS_MB:
        return f"peak RSS {answer['rss_mb']:.0f} MB"
    if answer["outcome"] == "error" and not answer["named"]:
        return f"{answer['type']} without the file's name: {answer['message'][:300]}"
    return None


def _case(seed: Seed, data: bytes, where: Path) -> tuple[Path, list[str]]:
    """A copy of the seed's folder with its file replaced by ``data``: (what to open, its names)."""
    if where.exists():
        shutil.rmtree(where)
    shutil.copytree(seed.folder, where)
    (where / seed.file).write_bytes(data)
    target = where / seed.file if seed.format in ("jpeg", "png", "webp", "wav", "flac", "mp3", "ogg", "m4a", "mp4", "mkv") else where
    return target, [seed.file, where.name, str(where)]


def _save(kind: str, data: bytes, reason: str) -> Path:
    folder = REGRESSIONS / kind
    folder.mkdir(parents=True, exist_ok=True)
    # One file per kind of failure, overwritten while Hypothesis shrinks: the last is the smallest.
    signature = hashlib.sha256(reason.split(":")[0].encode()).hexdigest()[:12]
    path = folder / f"{kind}-{signature}.bin"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_mutated_inputs_decode_or_fail_by_name(kind: str, seeds: dict[str, Seed], worker: Worker, tmp_path: Path) -> None:
    seed = seeds[kind]
    original = (seed.folder / seed.file).read_bytes()
    fields = PARSERS[kind](original)
    answer = worker.run(kind, *_case(seed, original, tmp_path / "case"))
    assert answer["outcome"] == "decoded", f"the seed itself fails: {answer}"
    budget = Budget(SECONDS)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not FRESH, database=None, suppress_health_check=list(HealthCheck))
    @given(data=mutated(original, fields, json_text=kind in JSON_KINDS))
    def check(data: bytes) -> None:
        if not budget.allows_another():
            return
        answer = worker.run(kind, *_case(seed, data, tmp_path / "case"))
        reason = _verdict(answer)
        if reason is not None:
            budget.seconds = 0  # Hypothesis shrinks the failure and replays it: every case runs from here
            saved = _save(kind, data, reason)
            raise AssertionError(f"{kind}: {reason} (saved as {saved.relative_to(ROOT)})")

    check()
    print(f"{kind}: {budget.cases} mutated cases judged{budget.cut_short()}")


class Budget:
    """How many cases a format has run, and whether its time budget allows another (``seconds``
    0: no budget). Hypothesis keeps drawing after the budget is spent; the cases it draws then
    are not run (drawing costs microseconds, a slow format's case seconds)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.cases = 0
        self.skipped = 0

    def allows_another(self) -> bool:
        if self.seconds and time.monotonic() - self.started > self.seconds:
            self.skipped += 1
            return False
        self.cases += 1
        return True

    def cut_short(self) -> str:
        return f" ({self.skipped} not run: past the {self.seconds:.0f} s budget)" if self.skipped else ""


@pytest.mark.parametrize("kind", sorted(GENERATED))
def test_generated_inputs_work_or_are_refused_by_name(kind: str, worker: Worker, tmp_path: Path) -> None:
    # Inputs an operator types or a program hands over (a filter, a key list): drawn whole by a
    # strategy, pickled for the worker, judged as a file's case is.
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not FRESH, database=None, suppress_health_check=list(HealthCheck))
    @given(value=GENERATED[kind])
    def check(value: object) -> None:
        data = pickle.dumps(value)
        (tmp_path / "case.pickle").write_bytes(data)
        reason = _verdict(worker.run(kind, tmp_path / "case.pickle", []))
        if reason is not None:
            saved = _save(kind, data, reason)
            raise AssertionError(f"{kind}: {reason} (saved as {saved.relative_to(ROOT)})")

    check()


def _saved() -> list[Path]:
    return sorted(path for path in REGRESSIONS.glob("*/*.bin")) if REGRESSIONS.exists() else []


@pytest.mark.parametrize("path", _saved(), ids=lambda path: f"{path.parent.name}/{path.name}")
def test_saved_regressions_stay_fixed(path: Path, seeds: dict[str, Seed], worker: Worker, tmp_path: Path) -> None:
    kind = path.parent.name
    if kind in GENERATED:  # a pickled value, run as it is
        answer = worker.run(kind, path, [])
    else:
        answer = worker.run(kind, *_case(seeds[kind], path.read_bytes(), tmp_path / "case"))
    assert _verdict(answer) is None, answer


def test_mutations_reach_the_fields_they_aim_at(seeds: dict[str, Seed]) -> None:
    # The structure parsers find each format's size fields (a parser that found none would leave
    # the fuzzer flipping bits blindly).
    # MPEG audio frames carry no sizes to aim at: bit flips and cuts only; a save_to_disk
    # folder's state.json and dataset_info.json hold no numbers: JSON's own mutations aim at
    # their structure.
    blind = {"mp3", "datasets-state", "datasets-info"}
    for kind, seed in seeds.items():
        fields = PARSERS[kind]((seed.folder / seed.file).read_bytes())
        assert kind in blind or len(fields) >= 2, (kind, fields)
