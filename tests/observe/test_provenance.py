"""The provenance ledger and replay: a killed run's batches rebuilt byte for byte, a changed
sample named, step numbers carried across a resume, held batches recorded only once delivered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.bench import iter_jpegs
from stoker.errors import ProvenanceError
from stoker.loader import FailurePolicy, Sampling, replay
from stoker.observe import ledger_metadata, read_ledger
from stoker.sampling import Sampler
from stoker.storage import FileStorage

pytest.importorskip("pyarrow")


def jpeg_folder(root: Path, count: int = 151) -> Path:
    for index, data in enumerate(iter_jpegs(count, 64, 48, 3)):
        folder = root / f"class_{index % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{index:04d}.jpg").write_bytes(data)
    return root


def corrupt_the_first_sample_of(root: Path, *, seed: int, rank: int, world_size: int) -> None:
    """Make the first sample of that rank's epoch 0 a bad one (zero-filled under on_error="zero")."""
    with FileStorage(root) as storage:
        first = int(Sampler(len(storage), seed=seed, rank=rank, world_size=world_size).plan_arrays().indices[0])
        (root / storage.keys[first]).write_bytes(b"\xff\xd8 not a jpeg at all")


RUN = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from stoker import Loader
    from stoker.loader import FailurePolicy, Sampling
    from stoker.ops import ImageTransform

    images, ledger, out, kill_after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    loader = Loader(
        images,
        batch_size=8,
        transform=ImageTransform(random_resized_crop=32, flip_probability=0.5, layout="CHW"),
        sampling=Sampling(seed=7, rank=1, world_size=2),
        failure_policy=FailurePolicy(on_error="zero", max_bad_samples=None),
    )
    loader.record_provenance(ledger)
    step = 0
    for epoch in range(3):
        for batch in loader:
            np.save(os.path.join(out, f"step-{step}.npy"), batch.data)
            np.save(os.path.join(out, f"valid-{step}.npy"), batch.valid)
            if step == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            step += 1
    """
)


def test_a_killed_runs_batches_replay_byte_for_byte(tmp_path: Path) -> None:
    images = jpeg_folder(tmp_path / "images")
    corrupt_the_first_sample_of(images, seed=7, rank=1, world_size=2)
    ledger, out = tmp_path / "ledger", tmp_path / "out"
    out.mkdir()
    script = tmp_path / "run.py"
    script.write_text(RUN)
    done = subprocess.run(
        [sys.executable, str(script), str(images), str(ledger), str(out), "14"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    table = read_ledger(ledger)
    steps = sorted(set(table.column("step").to_pylist()))
    assert steps == list(range(15)), "every batch up to the kill, none after"
    assert ledger_metadata(ledger, rank=1)["transform"]["type"] == "ImageTransform"
    padded = zero_filled = 0
    for step in steps:
        batch = replay(ledger, step, rank=1, storage=images)
        original = np.load(out / f"step-{step}.npy")
        assert batch.data.tobytes() == original[: len(batch.keys)].tobytes(), f"step {step} differs"
        assert np.array_equal(batch.valid, np.load(out / f"valid-{step}.npy"))
        padded += int(batch.padding.sum())
        zero_filled += int((~batch.valid & ~batch.padding).sum())
    assert padded >= 1, "rank 1's padding slot was replayed too"
    assert zero_filled >= 1, "the corrupt image's zero-filled slot was replayed as zeros"
    # The command line says the same, and saves the batch.
    shown = subprocess.run(
        [sys.executable, "-m", "stoker.cli", "replay", str(ledger), "--step", "3", "--rank", "1", "--storage-from-ledger"]
        + ["--out", str(tmp_path / "b.npy")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "every sample's bytes match the ledger" in shown.stdout
    assert np.load(tmp_path / "b.npy").tobytes() == np.load(out / "step-3.npy").tobytes()


def test_replay_names_a_sample_whose_bytes_changed(tmp_path: Path) -> None:
    images = jpeg_folder(tmp_path / "images", count=40)
    loader = Loader(images, batch_size=8, sampling=Sampling(seed=1), failure_policy=FailurePolicy(on_error="skip"))
    loader.record_provenance(tmp_path / "ledger")
    first = next(iter(loader))
    loader.close()
    victim = first.keys[2]
    (images / victim).write_bytes(b"other bytes")
    with pytest.raises(ProvenanceError, match=f"1 sample\\(s\\) changed: {victim}.* 11 bytes"):
        replay(tmp_path / "ledger", 0, storage=images)
    assert replay(tmp_path / "ledger", 0, storage=images, verify=False).keys == first.keys


def test_a_resumed_run_continues_the_step_numbers_in_a_new_file(tmp_path: Path) -> None:
    images = jpeg_folder(tmp_path / "images", count=60)
    ledger = tmp_path / "ledger"
    loader = Loader(images, batch_size=4, failure_policy=FailurePolicy(on_error="skip"))
    loader.record_provenance(ledger)
    for number, _ in enumerate(loader):
        if number == 2:
            state = loader.state_dict()
            break
    loader.close()
    resumed = Loader(images, batch_size=4, failure_policy=FailurePolicy(on_error="skip"))
    resumed.record_provenance(ledger)
    resumed.load_state_dict(state)
    keys = [batch.keys for _, batch in zip(range(2), resumed)]
    resumed.close()
    runs = sorted(path.name for path in ledger.iterdir() if path.name.startswith("rank-"))
    assert runs == ["rank-00000-0000.arrows", "rank-00000-0001.arrows"]
    assert [path.name for path in ledger.glob("keys-*.parquet")], "the dataset's key list, once, beside the ledger"
    table = read_ledger(ledger)
    assert table.column("step").to_pylist() == [step for step in range(5) for _ in range(4)]
    assert replay(ledger, 4, storage=images).keys == keys[1]


def test_held_batches_are_recorded_when_released_and_not_before(tmp_path: Path) -> None:
    images = jpeg_folder(tmp_path / "images", count=40)
    loader = Loader(images, batch_size=4, failure_policy=FailurePolicy(on_error="skip"))
    loader.record_provenance(tmp_path / "ledger")
    with loader.hold_deliveries():
        batches = iter(loader)
        held = [next(batches) for _ in range(3)]
        loader.release(held[0])
        loader.release(held[1])
        assert loader.state_dict()["step"] == 2
        batches.close()  # type: ignore[attr-defined]
    loader.close()
    table = read_ledger(tmp_path / "ledger")
    assert table.column("step").to_pylist() == [0] * 4 + [1] * 4
    assert table.column("key").to_pylist() == held[0].keys + held[1].keys


def test_no_ledger_without_pyarrow_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ValueError, match=r"pip install 'stoker\[parquet\]'"):
        Loader(jpeg_folder(tmp_path / "images", count=4), batch_size=2).record_provenance(tmp_path / "ledger")
    assert not (tmp_path / "ledger").exists() or not os.listdir(tmp_path / "ledger")
