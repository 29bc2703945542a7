"""Resuming after the dataset changed, by key: a run is killed after a checkpoint; before its
resume, samples are removed (some delivered already, some not) and others added; the resume,
given the saved dataset's key list, goes on in the saved order. Killed again, it resumes again
(from the same key list), at another world size. Over the runs every sample still there is
delivered exactly once, removed samples never after their removal, added ones in the next epoch
or at the end of this one, every rank takes the same number of steps, and `verify_epoch`
accounts for each sample as delivered or removed. At 2 and 3 ranks."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

SAMPLES = 1009

# Ranks in lockstep in one process. Arguments: world, the dataset's keys (a JSON file), the
# states to resume from ("-" for none), the key list directory, when added samples are read,
# the step after which to save every rank's state, the step after which the job is killed (-1:
# run the epoch and the next to the end), where to write.
RUN = textwrap.dedent(
    """
    import json, sys
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.storage import MemoryStorage
    from stoker_testbed.resume_runs import run_in_lockstep

    world, dataset, resume, keys_dir, new_samples = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    save_at, kill_at, out = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
    data = MemoryStorage({key: key.encode() for key in json.load(open(dataset))})
    loaders = [Loader(data, batch_size=8, sampling=Sampling(seed=5, in_order=True, rank=rank, world_size=world)) for rank in range(world)]
    loaders[0].save_keys(keys_dir)  # what record_provenance writes beside its ledger
    if resume != "-":
        for loader in loaders:
            loader.load_state_dict(json.load(open(resume))["states"], keys_before=keys_dir, new_samples=new_samples)
    record = run_in_lockstep(loaders, save_at=save_at, kill_at=kill_at, out=out)
    record["next_epoch"] = []
    for loader in loaders:  # the next epoch reads the dataset as it is now
        record["next_epoch"] += [key for batch in loader for key, padding in zip(batch.keys, batch.padding) if not padding]
    with open(out, "w") as file:
        json.dump(record, file)
    """
)


def run(tmp_path: Path, name: str, world: int, dataset: list[str], *, resume: str = "-", new_samples: str = "next_epoch",
        save_at: int = -1, kill_at: int = -1) -> dict:  # fmt: skip
    keys = tmp_path / f"{name}.keys.json"
    keys.write_text(json.dumps(dataset))
    out = tmp_path / name
    arguments = [str(world), str(keys), resume, str(tmp_path / "key-lists"), new_samples, str(save_at), str(kill_at), str(out)]
    done = subprocess.run([sys.executable, "-c", RUN, *arguments], capture_output=True, text=True, timeout=300)
    assert done.returncode == (-signal.SIGKILL if kill_at >= 0 else 0), done.stderr[-3000:]
    return {**json.loads(out.read_text()), "log": done.stderr}


@pytest.mark.parametrize(("world", "then", "new_samples"), [(2, 2, "next_epoch"), (3, 2, "this_epoch"), (2, 3, "this_epoch")])
def test_an_epoch_resumes_by_key_after_samples_were_removed_and_added(tmp_path: Path, world: int, then: int, new_samples: str) -> None:
    (tmp_path / "key-lists").mkdir()
    old = [f"k{index:05d}" for index in range(SAMPLES)]
    first = run(tmp_path, "first.json", world, old, save_at=9, kill_at=20)
    delivered_first = [key for step, key in first["delivered"] if step <= 9]
    never_read = sorted(set(old) - {key for _, key in first["delivered"]})
    removed_delivered, removed_unread = set(delivered_first[::25][:3]), set(never_read[::97][:4])
    added = [f"new{index:03d}" for index in range(13)]
    changed = [key for key in old if key not in removed_delivered | removed_unread] + added

    second = run(
        tmp_path, "second.json", world, changed, resume=str(tmp_path / "first.json"), new_samples=new_samples, save_at=15, kill_at=18
    )
    assert "resuming epoch 0 by key over a changed dataset (1009 samples then, 1015 now)" in second["log"]
    assert "3 removed after they were delivered" in second["log"] and "4 removed unread" in second["log"]
    last = run(tmp_path, "last.json", then, changed, resume=str(tmp_path / "second.json"), new_samples=new_samples)

    kept = delivered_first + [key for step, key in second["delivered"] if step <= 15] + [key for _, key in last["delivered"]]
    delivered = Counter(kept)
    truth = Counter(set(old) - removed_unread | (set(added) if new_samples == "this_epoch" else set()))
    assert delivered == truth, f"missing {sorted(truth - delivered)[:5]}, repeated {sorted(k for k, c in delivered.items() if c > 1)[:5]}"
    assert not removed_unread & set(kept), "a removed sample is never read after its removal"
    assert len(set(second["steps"])) == 1 and len(set(last["steps"])) == 1, "every rank takes the same steps"
    samples = SAMPLES + (len(added) if new_samples == "this_epoch" else 0)
    assert last["proof"] == {"epoch": 0, "samples": samples, "delivered": samples - 4, "excluded": 0, "removed": 4, "added": 13}
    assert Counter(last["next_epoch"]) == Counter(changed), "the next epoch reads the changed dataset, each sample once"
