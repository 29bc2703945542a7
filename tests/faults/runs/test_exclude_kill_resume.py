"""Cutting out a loss spike: a run killed after a spike resumes from a checkpoint before it with
`Loader.exclude(steps=...)`; the batches of those steps are never read again, every other sample
of the epoch is delivered exactly once over the runs, every rank takes the same number of steps,
a second kill after the exclusion keeps them out, and `verify_epoch` proves the rest, counting
the left-out samples apart. The same by key, with the keys the ledger of the run that reached the
spike names (`ledger_keys`). At 2 and 3 ranks."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling
from stoker.observe import ledger_keys, read_exclusions
from stoker.storage import MemoryStorage

SAMPLES = 1009

# Ranks in lockstep in one process. Arguments: world, the states to resume from ("-" for none),
# the steps to leave out ("-" for none; "keys:FILE" for the keys a JSON file lists, after a
# resume from every rank's states; "live:STEP:FILE" for those keys after STEP, while iterating), the step after which to save every rank's state, the step
# after which the job is killed (-1: run to the end), where to write, the ledger's directory
# ("-" for none), and how many batches a read-ahead wrapper holds ahead of each rank's loop (0: none).
RUN = textwrap.dedent(
    f"""
    import json, sys
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.storage import MemoryStorage
    from stoker_testbed.resume_runs import run_in_lockstep

    world, resume, cut, save_at, kill_at, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    data = MemoryStorage({{f"k{{index:05d}}": index.to_bytes(4, "little") for index in range({SAMPLES})}})
    loaders = [Loader(data, batch_size=8, sampling=Sampling(seed=5, in_order=True, rank=rank, world_size=world)) for rank in range(world)]
    if sys.argv[7] != "-":
        for loader in loaders:
            loader.record_provenance(sys.argv[7])
    if resume != "-":
        for rank, loader in enumerate(loaders):
            states = json.load(open(resume))["states"]
            loader.load_state_dict(states if cut.startswith("keys:") else states[rank])
    between = None
    if cut.startswith("keys:"):
        for loader in loaders:
            loader.exclude(keys=json.load(open(cut[5:])))
    elif cut.startswith("live:"):  # live:STEP:FILE: every rank leaves the keys out after STEP, while its loop runs
        at, listed = int(cut.split(":")[1]), cut.split(":", 2)[2]

        def between(step):
            if step == at:
                for loader in loaders:
                    loader.exclude(keys=json.load(open(listed)))
    elif cut != "-":
        start, stop = map(int, cut.split(":"))
        for loader in loaders:
            loader.exclude(steps=range(start, stop))
    record = run_in_lockstep(loaders, save_at=save_at, kill_at=kill_at, out=out, between=between, ahead=int(sys.argv[8]))
    for loader in loaders:
        loader.close()
    with open(out, "w") as file:
        json.dump(record, file)
    """
)


def run(
    tmp_path: Path,
    name: str,
    world: int,
    *,
    resume: str = "-",
    cut: str = "-",
    save_at: int = -1,
    kill_at: int = -1,
    ledger: str = "-",
    ahead: int = 0,
) -> dict:
    out = tmp_path / name
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(world), resume, cut, str(save_at), str(kill_at), str(out), ledger, str(ahead)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == (-signal.SIGKILL if kill_at >= 0 else 0), done.stderr[-3000:]
    return json.loads(out.read_text())


def assert_the_rest_delivered_once(kept: list[str], left_out: set[str], cut: dict, rest: dict) -> None:
    """Over the runs, ``kept`` (every sample delivered) holds each sample but ``left_out`` once,
    every rank took the same steps in the run that cut and the run after it, and `verify_epoch`
    counts the left-out samples as excluded."""
    delivered = Counter(kept)
    assert not left_out & set(delivered), "the samples left out are never read after"
    truth = Counter({f"k{index:05d}": 1 for index in range(SAMPLES)}) - Counter({key: 1 for key in left_out})
    assert delivered == truth, f"missing {sorted(truth - delivered)[:5]}, repeated {sorted(k for k, c in delivered.items() if c > 1)[:5]}"
    assert len(set(cut["steps"])) == 1 and len(set(rest["steps"])) == 1, "every rank takes the same steps"
    assert rest["proof"] == {
        "epoch": 0,
        "samples": SAMPLES,
        "delivered": SAMPLES - len(left_out),
        "excluded": len(left_out),
        "removed": 0,
        "added": 0,
    }


@pytest.mark.parametrize(("world", "by"), [(2, "steps"), (3, "steps"), (2, "keys"), (3, "keys")])
def test_the_batches_of_a_spike_are_cut_out_across_kills_and_the_rest_is_proven(tmp_path: Path, world: int, by: str) -> None:
    # The run as it would have gone, with its ledger: which samples each step held.
    went_on = run(tmp_path, "went_on.json", world, ledger=str(tmp_path / "ledger"))
    at_step: dict[int, set[str]] = {}
    for step, key in went_on["delivered"]:
        at_step.setdefault(step, set()).add(key)
    spike = set().union(*(at_step[step] for step in range(28, 33)))
    named = ledger_keys(tmp_path / "ledger", steps=range(28, 33))
    assert sorted(named) == sorted(spike), "the ledger names the samples of those steps, each once"
    (tmp_path / "spike.json").write_text(json.dumps(named))

    before = run(tmp_path, "before.json", world, save_at=9, kill_at=35)  # checkpoint at step 9; the spike at 30
    how = "28:33" if by == "steps" else f"keys:{tmp_path / 'spike.json'}"
    cut = run(tmp_path, "cut.json", world, resume=str(tmp_path / "before.json"), cut=how, save_at=33, kill_at=36)
    rest = run(tmp_path, "rest.json", world, resume=str(tmp_path / "cut.json"))

    kept = [key for step, key in before["delivered"] if step <= 9]
    kept += [key for step, key in cut["delivered"] if step <= 33]
    kept += [key for _, key in rest["delivered"]]
    assert_the_rest_delivered_once(kept, spike, cut, rest)


@pytest.mark.parametrize("world", [2, 3])
def test_keys_left_out_while_every_rank_iterates_stay_out_across_a_kill(tmp_path: Path, world: int) -> None:
    # Samples found bad mid-run: every rank leaves them out after step 12, between two batches
    # of its running loop; one of them was delivered at step 2 already and stays delivered.
    went_on = run(tmp_path, "went_on.json", world, ledger=str(tmp_path / "ledger"))
    at_step: dict[int, list[str]] = {}
    for step, key in went_on["delivered"]:
        at_step.setdefault(step, []).append(key)
    bad = sorted(set().union(*(at_step[step] for step in range(28, 33))) | {at_step[2][0]})
    (tmp_path / "bad.json").write_text(json.dumps(bad))

    live = run(tmp_path, "live.json", world, cut=f"live:12:{tmp_path / 'bad.json'}", save_at=20, kill_at=24)
    rest = run(tmp_path, "rest.json", world, resume=str(tmp_path / "live.json"))
    kept = [key for step, key in live["delivered"] if step <= 20] + [key for _, key in rest["delivered"]]
    assert [key for step, key in live["delivered"] if step <= 12] == [key for step, key in went_on["delivered"] if step <= 12]
    assert_the_rest_delivered_once(kept, set(bad) - {at_step[2][0]}, live, rest)


@pytest.mark.parametrize(("world", "ahead"), [(2, 1), (3, 2)])
def test_keys_left_out_while_ranks_read_ahead_stay_out_across_a_kill(tmp_path: Path, world: int, ahead: int) -> None:
    # The same, each rank's loop fed through a wrapper holding `ahead` batches (as to_device
    # holds one): the batches read ahead when the keys are given are delivered as they were, a
    # checkpoint and the kill come while batches are held, and the resume reads those again.
    went_on = run(tmp_path, "went_on.json", world)
    at_step: dict[int, list[str]] = {}
    for step, key in went_on["delivered"]:
        at_step.setdefault(step, []).append(key)
    read_already = {at_step[2][0], at_step[12 + ahead][0]}  # delivered, and read ahead, at step 12
    bad = sorted(set().union(*(at_step[step] for step in range(28, 33))) | read_already)
    (tmp_path / "bad.json").write_text(json.dumps(bad))

    live = run(tmp_path, "live.json", world, cut=f"live:12:{tmp_path / 'bad.json'}", save_at=20, kill_at=24, ahead=ahead)
    rest = run(tmp_path, "rest.json", world, resume=str(tmp_path / "live.json"), ahead=ahead)
    kept = [key for step, key in live["delivered"] if step <= 20] + [key for _, key in rest["delivered"]]
    unchanged = [key for step, key in went_on["delivered"] if step <= 12 + ahead]
    assert [key for step, key in live["delivered"] if step <= 12 + ahead] == unchanged, "what was read ahead is delivered as it was"
    assert_the_rest_delivered_once(kept, set(bad) - read_already, live, rest)


def loader(rank: int = 0, world: int = 1) -> Loader:
    data = MemoryStorage({f"k{index}": bytes([index % 256]) for index in range(300)})
    return Loader(data, batch_size=10, sampling=Sampling(seed=1, in_order=True, rank=rank, world_size=world))


def test_steps_delivered_already_or_past_the_epoch_are_refused_by_name() -> None:
    made = loader()
    stream = iter(made)
    for _ in range(5):
        next(stream)
    with pytest.raises(ConfigurationError, match="at step 5 and epoch 0 ends with step 29"):
        made.exclude(steps=range(3, 8))
    with pytest.raises(ConfigurationError, match="ends with step 29"):
        made.exclude(steps=range(25, 31))
    with pytest.raises(ConfigurationError, match="consecutive steps"):
        made.exclude(steps=range(10, 20, 2))


def test_steps_left_out_while_iterating_apply_from_the_next_batch() -> None:
    straight = [list(batch.keys) for batch in loader()]
    made = loader()
    seen = []
    for number, batch in enumerate(made):
        seen.append(list(batch.keys))
        if number == 4:
            made.exclude(steps=range(6, 9))  # batches 5 and up may be read ahead already
    assert seen == straight[:6] + straight[9:]
    assert made.verify_epoch() == {"epoch": 0, "samples": 300, "delivered": 270, "excluded": 30, "removed": 0, "added": 0}


def test_steps_left_out_through_a_read_ahead_wrapper_are_the_same_batches() -> None:
    straight = [list(batch.keys) for batch in loader()]
    made = loader()
    seen = []
    with made.hold_deliveries():  # a wrapper reading one batch ahead, as stoker.device.to_device does
        stream = iter(made)
        ahead = next(stream, None)
        while ahead is not None:
            current, ahead = ahead, next(stream, None)
            made.release(current)
            seen.append(list(current.keys))
            if len(seen) == 5:
                made.exclude(steps=range(6, 9))  # the batch of step 5 is read ahead already
    assert seen == straight[:6] + straight[9:]


def test_keys_left_out_in_a_world_of_one_are_never_read_and_delivered_ones_are_named(caplog: pytest.LogCaptureFixture) -> None:
    made = loader()
    stream = iter(made)
    first = [key for _ in range(3) for key in next(stream).keys]
    stream.close()  # out of the loop: keys are left out between runs of it
    cut = [first[0], "k7", "k250", "k123"]
    with caplog.at_level(logging.INFO, logger="stoker.loader"):
        made.exclude(keys=cut)
    assert f"already delivered or left out this epoch, so not: {first[0]}" in caplog.text
    rest = [key for batch in made for key in batch.keys]
    left_out = set(cut) - set(first)
    assert not left_out & set(rest)
    assert sorted(first + rest) == sorted({f"k{index}" for index in range(300)} - left_out)
    assert made.verify_epoch() == {
        "epoch": 0,
        "samples": 300,
        "delivered": 300 - len(left_out),
        "excluded": len(left_out),
        "removed": 0,
        "added": 0,
    }


def test_keys_left_out_while_iterating_apply_from_the_next_batch() -> None:
    straight = [key for batch in loader() for key in batch.keys]
    made = loader()
    seen: list[str] = []
    for number, batch in enumerate(made):
        seen += batch.keys
        if number == 2:  # batch 3 may be read ahead already: it is dealt again without them
            made.exclude(keys=[seen[0], straight[35], straight[200]])
    assert seen[:30] == straight[:30]
    assert sorted(seen) == sorted(set(straight) - {straight[35], straight[200]})
    assert made.verify_epoch() == {"epoch": 0, "samples": 300, "delivered": 298, "excluded": 2, "removed": 0, "added": 0}


def test_an_empty_list_of_keys_leaves_nothing_out_and_the_epoch_runs() -> None:
    # Found by tests/sampling/test_settle_deliveries.py: an empty left-out set crashed the first
    # delivery after it (PositionSet.count_below of no ranges).
    made = loader()
    made.exclude(keys=[])
    assert sorted(key for batch in made for key in batch.keys) == sorted(f"k{index}" for index in range(300))
    assert made.verify_epoch()["excluded"] == 0


def test_keys_unknown_or_at_the_wrong_moment_are_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match=r"1 keys are not in .* e.g. \['nope'\]"):
        loader().exclude(keys=["k1", "nope"])
    with pytest.raises(ConfigurationError, match="steps= or keys=, one of them"):
        loader().exclude(steps=range(1, 2), keys=["k1"])
    made = loader(rank=0, world=2)
    with made.hold_deliveries():  # a read-ahead wrapper that does not say how far it reads ahead
        stream = iter(made)
        next(stream)
        with pytest.raises(
            ConfigurationError, match=r"without saying how far it reads ahead \(hold_deliveries\(ahead=...\).*1 batch\(es\) held"
        ):
            made.exclude(keys=["k1"])
        stream.close()
    data = MemoryStorage({f"k{index}": bytes([index % 256]) for index in range(300)})
    unordered = Loader(data, batch_size=10, sampling=Sampling(seed=1, rank=0, world_size=2))  # in_order=False, the default
    for _ in unordered:
        with pytest.raises(ConfigurationError, match=r"needs batches in order \(Sampling\(in_order=True\)\)"):
            unordered.exclude(keys=["k1"])
        break
    alone = Loader(data, batch_size=10, sampling=Sampling(seed=1))  # one rank: its own record is the world's, in any order
    for _ in alone:
        alone.exclude(keys=["k299"])
    assert alone.verify_epoch()["excluded"] == 1


def test_exclusions_are_recorded_beside_the_ledger_and_replay_lists_them(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    made = loader()
    made.record_provenance(tmp_path / "ledger")
    made.exclude(steps=range(2, 4))
    stream = iter(made)
    next(stream)
    stream.close()
    made.exclude(keys=["k5", "k6"])
    made.close()
    recorded = read_exclusions(tmp_path / "ledger")
    assert [(made["step"], made["steps"], made["samples"]) for made in recorded] == [(0, [2, 3], 20), (1, None, 2)]
    assert sorted(recorded[1]["keys"]) == ["k5", "k6"]
    shown = subprocess.run(
        [sys.executable, "-m", "stoker.cli", "replay", str(tmp_path / "ledger"), "--exclusions"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "rank 0, epoch 0, at step 0: steps 2 to 3, 20 samples left out" in shown.stdout
    assert "rank 0, epoch 0, at step 1: by key, 2 samples left out" in shown.stdout
    # The record is input: a damaged line is skipped, by name, and the rest read.
    with open(tmp_path / "ledger" / "exclusions-rank-00000.jsonl", "a") as file:
        file.write('{"epoch": -1, "step": "x"}\nnot json\n')
    with caplog.at_level(logging.WARNING, logger="stoker.observe"):
        assert len(read_exclusions(tmp_path / "ledger")) == 2
    assert "exclusions-rank-00000.jsonl line 3: not an exclusion record, skipped" in caplog.text
