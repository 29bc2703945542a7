"""A curriculum of filters by step (`Loader.set_filter_schedule`): each epoch holds exactly the
samples the point in force when it began keeps (each once, equal steps on every rank,
`verify_epoch` over them); the schedule and the epoch's point are part of the state, so a run
killed mid-epoch resumes (not given the schedule again, at 2 and 3 ranks and into another world
size) and the next epoch switches as the run that went on would; with ``where=`` both filters
hold; a filter that cannot be worked out is named with its step, when given or when loaded."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling
from stoker.storage import MemoryStorage, MixedStorage, ParquetStorage

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = 601
SCORES = np.random.default_rng(11).uniform(0, 10, ROWS).round(2)
LENGTHS = np.random.default_rng(12).integers(10, 3000, ROWS)
SCHEDULE = {0: "score < 4", 50: "score >= 4 and length < 2000", 120: None}


@pytest.fixture
def parquet(tmp_path: Path) -> Path:
    path = tmp_path / "a.parquet"
    table = pa.table({"payload": [index.to_bytes(4, "little") for index in range(ROWS)], "score": SCORES, "length": LENGTHS})
    pq.write_table(table, path, row_group_size=50)
    return path


def keys_kept(rule: Any) -> set[str]:
    return {f"a.parquet#{index}" for index in range(ROWS) if rule(SCORES[index], LENGTHS[index])}


RULES = {
    0: lambda score, length: score < 4,
    50: lambda score, length: score >= 4 and length < 2000,
    120: lambda score, length: True,
}


def epoch_keys(loader: Loader) -> list[str]:
    return [key for batch in loader for key, padding in zip(batch.keys, batch.padding) if not padding]


@pytest.mark.parametrize("shuffle", ["uniform", "block"])
def test_each_epoch_holds_what_the_point_in_force_when_it_began_keeps(parquet: Path, shuffle: str) -> None:
    loader = Loader(ParquetStorage(parquet), batch_size=10, sampling=Sampling(seed=3, shuffle=shuffle))
    loader.set_filter_schedule(SCHEDULE)
    for epoch in range(8):
        began = loader.step
        point = max(step for step in SCHEDULE if step <= began)
        keys = epoch_keys(loader)
        assert Counter(keys) == Counter({key: 1 for key in keys_kept(RULES[point])}), f"epoch {epoch}, begun at step {began}"
        proof = loader.verify_epoch()
        assert proof["samples"] == proof["delivered"] == len(keys)
    assert loader.step > 120, "the schedule ran through all its points"


def test_a_schedule_given_mid_epoch_applies_from_the_next(parquet: Path, caplog: pytest.LogCaptureFixture) -> None:
    loader = Loader(ParquetStorage(parquet), batch_size=10, sampling=Sampling(seed=3))
    stream = iter(loader)
    first = [next(stream) for _ in range(5)]
    with caplog.at_level(logging.INFO, logger="stoker.loader"):
        loader.set_filter_schedule({0: "score < 4"})
    assert "from the first epoch that begins" in caplog.text
    rest = [key for batch in stream for key in batch.keys]
    assert len(rest) + sum(len(batch.keys) for batch in first) == ROWS, "this epoch is not cut short"
    assert Counter(epoch_keys(loader)) == Counter({key: 1 for key in keys_kept(RULES[0])})


def test_with_where_both_filters_hold(parquet: Path) -> None:
    loader = Loader(ParquetStorage(parquet), batch_size=7, sampling=Sampling(seed=1, where="length >= 1000"))
    loader.set_filter_schedule({0: "score < 6"})
    expected = keys_kept(lambda score, length: score < 6 and length >= 1000)
    assert Counter(epoch_keys(loader)) == Counter({key: 1 for key in expected})


RUN = textwrap.dedent(
    """
    import json, sys
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.storage import ParquetStorage
    from stoker_testbed.resume_runs import run_in_lockstep

    path, world, out, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    saved_world = int(sys.argv[5]) if len(sys.argv) > 5 else world
    loaders = [Loader(ParquetStorage(path), batch_size=8, sampling=Sampling(seed=4, rank=rank, world_size=world)) for rank in range(world)]
    if resume == "-":
        for loader in loaders:
            loader.set_filter_schedule({0: "score < 5", 12: "score >= 5"})
    else:
        states = json.load(open(resume))["states"]
        for rank, loader in enumerate(loaders):
            loader.load_state_dict(states if world != saved_world else states[rank])  # the schedule comes with the state
    record = {"epochs": [], "steps": []}
    for epoch in range(2):  # the killed run: every state saved after step 8, killed after step 10
        first = resume == "-" and epoch == 0
        ran = run_in_lockstep(loaders, save_at=8 if first else -1, kill_at=10 if first else -1, out=out)
        record["epochs"].append({"delivered": [key for _, key in ran["delivered"]], "proof": ran["proof"]})
        record["steps"].append(ran["steps"])
    with open(out, "w") as file:
        json.dump(record, file)
    """
)


@pytest.mark.parametrize(("before", "after"), [(2, 2), (3, 3), (2, 3)])
def test_a_run_killed_mid_epoch_resumes_under_its_filter_and_the_next_epoch_switches(
    parquet: Path, tmp_path: Path, before: int, after: int
) -> None:
    saved, resumed_out = tmp_path / "saved.json", tmp_path / "resumed.json"
    killed = subprocess.run(
        [sys.executable, "-c", RUN, str(parquet), str(before), str(saved), "-"], capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    states = json.loads(saved.read_text())
    states["delivered"] = [key for _, key in states["delivered"]]  # run_in_lockstep records [step, key]
    assert all(state["filter_schedule"]["epoch_filter"] == "score < 5" for state in states["states"])
    resumed = subprocess.run(
        [sys.executable, "-c", RUN, str(parquet), str(after), str(resumed_out), str(saved), str(before)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    record = json.loads(resumed_out.read_text())
    first, second = record["epochs"]
    low = keys_kept(lambda score, length: score < 5)
    assert Counter(states["delivered"] + first["delivered"]) == Counter({key: 1 for key in low}), "the killed epoch: each once"
    assert first["proof"]["delivered"] == first["proof"]["samples"] == len(low)
    high = keys_kept(lambda score, length: score >= 5)
    assert Counter(second["delivered"]) == Counter({key: 1 for key in high}), "the next epoch began past step 12: the second filter"
    assert second["proof"]["delivered"] == len(high)
    assert all(len(set(steps)) == 1 for steps in record["steps"]), record["steps"]


def test_exclude_by_key_in_a_filtered_epoch_names_the_keys_it_does_not_hold(parquet: Path, caplog: pytest.LogCaptureFixture) -> None:
    loader = Loader(ParquetStorage(parquet), batch_size=10, sampling=Sampling(seed=3))
    loader.set_filter_schedule({0: "score < 4"})
    inside = sorted(keys_kept(RULES[0]))[:3]
    outside = sorted(set(f"a.parquet#{index}" for index in range(ROWS)) - keys_kept(RULES[0]))[:2]
    with caplog.at_level(logging.INFO, logger="stoker.loader"):
        loader.exclude(keys=inside + outside)
    assert outside[0] in caplog.text
    keys = epoch_keys(loader)
    assert Counter(keys) == Counter({key: 1 for key in keys_kept(RULES[0]) - set(inside)})
    assert loader.verify_epoch()["excluded"] == 3


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ({0: "score < 4", 30: "colour == 'red'"}, "step 30.*colour"),
        ({0: "score > 11"}, "step 0.*keeps none"),
        ({-2: "score < 4"}, "whole numbers >= 0"),
        ({0: 5}, "step 0: a filter expression"),
        ({}, "at least one step"),
    ],
)
def test_a_bad_schedule_is_named_with_its_step_when_given(parquet: Path, points: dict, message: str) -> None:
    loader = Loader(ParquetStorage(parquet), batch_size=10)
    with pytest.raises(ConfigurationError, match=message):
        loader.set_filter_schedule(points)
    assert len(epoch_keys(loader)) == ROWS, "a refused schedule changes nothing"


def test_a_mixture_refuses_a_filter_schedule() -> None:
    mixture = MixedStorage({"a": MemoryStorage({"x": b"1"}), "b": MemoryStorage({"y": b"2"})}, {"a": 1.0, "b": 1.0}, num_samples=4)
    with pytest.raises(ConfigurationError, match="mixture"):
        Loader(mixture, batch_size=2).set_filter_schedule({0: "score < 1"})


SHAPES = [(24, 16), (16, 24), (20, 20)]

# A bucketed Loader (JPEGs of three aspect ratios) in lockstep over a schedule: every rank's
# states saved after step 4, the job killed after step 6; or resumed from those states.
RUN_BUCKETS = textwrap.dedent(
    """
    import json, sys
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.ops import ImageTransform
    from stoker.sampling import Buckets
    from stoker.storage import ParquetStorage
    from stoker_testbed.resume_runs import run_in_lockstep

    path, world, out, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    sampling = lambda rank: Sampling(seed=4, rank=rank, world_size=world, buckets=Buckets([(24, 16), (16, 24), (20, 20)]))
    loaders = [Loader(ParquetStorage(path), batch_size=4, transform=ImageTransform(), sampling=sampling(rank)) for rank in range(world)]
    if resume == "-":
        for loader in loaders:
            loader.set_filter_schedule({0: "score < 5", 8: "score >= 5"})
    else:
        for loader in loaders:
            loader.load_state_dict(json.load(open(resume))["states"])
    record = {"epochs": []}
    for epoch in range(2):
        first = resume == "-" and epoch == 0
        ran = run_in_lockstep(loaders, save_at=4 if first else -1, kill_at=6 if first else -1, out=out)
        record["epochs"].append({"delivered": ran["delivered"], "proof": ran["proof"], "steps": ran["steps"]})
    with open(out, "w") as file:
        json.dump(record, file)
    """
)


@pytest.fixture
def jpeg_parquet(tmp_path: Path) -> Path:
    from stoker_testbed.data.images import jpeg

    path = tmp_path / "images.parquet"
    images = [jpeg(*SHAPES[index % 3], seed=index) for index in range(240)]
    pq.write_table(pa.table({"payload": images, "score": SCORES[:240]}), path, row_group_size=40)
    return path


def test_a_bucketed_epoch_under_a_filter_reads_each_batch_in_its_own_bucket_s_shape(jpeg_parquet: Path) -> None:
    from stoker.ops import ImageTransform
    from stoker.sampling import Buckets

    loader = Loader(
        ParquetStorage(jpeg_parquet), batch_size=4, transform=ImageTransform(), sampling=Sampling(seed=4, buckets=Buckets(SHAPES))
    )
    loader.set_filter_schedule({0: "score < 5", 8: None})
    shape_of = {f"images.parquet#{index}": SHAPES[index % 3] for index in range(240)}
    shaped: dict[tuple[int, int], set[tuple[int, ...]]] = {}
    for rule in (lambda score: score < 5, lambda score: True):  # the second epoch begins past step 8: no filter
        seen = []
        for batch in loader:
            (source,) = {shape_of[key] for key in batch.keys}  # one bucket's images
            shaped.setdefault(source, set()).add(tuple(batch.data.shape[1:3]))
            seen += batch.keys
        kept = {key for key in shape_of if rule(SCORES[int(key.split("#")[1])])}
        counts = loader.bucket_counts()
        assert counts is not None and set(seen) <= kept and len(seen) == counts["batches"] * 4
        assert sum(counts["samples"]) == len(kept), "the buckets counted over the epoch's samples"
    assert len(shaped) == 3 and all(len(shapes) == 1 for shapes in shaped.values()), f"each bucket's batches in its own shape: {shaped}"


@pytest.mark.parametrize(("before", "after"), [(2, 2), (2, 3)])
def test_a_bucketed_run_killed_mid_epoch_resumes_under_its_filter_in_whole_batches_of_one_bucket(
    jpeg_parquet: Path, tmp_path: Path, before: int, after: int
) -> None:
    saved, resumed_out = tmp_path / "saved.json", tmp_path / "resumed.json"
    killed = subprocess.run(
        [sys.executable, "-c", RUN_BUCKETS, str(jpeg_parquet), str(before), str(saved), "-"], capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = subprocess.run(
        [sys.executable, "-c", RUN_BUCKETS, str(jpeg_parquet), str(after), str(resumed_out), str(saved)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    first, second = json.loads(resumed_out.read_text())["epochs"]
    before_kill = json.loads(saved.read_text())["delivered"]
    shape_of = {f"images.parquet#{index}": SHAPES[index % 3] for index in range(240)}
    for epoch, rule, records in (
        (first, lambda score: score < 5, before_kill + first["delivered"]),
        (second, lambda score: score >= 5, second["delivered"]),
    ):
        delivered = [key for _, key in records]
        kept = {f"images.parquet#{index}" for index in range(240) if rule(SCORES[index])}
        assert max(Counter(delivered).values()) == 1 and set(delivered) <= kept, "each sample the filter keeps, once"
        assert epoch["proof"]["delivered"] == len(delivered) and epoch["proof"]["delivered"] + epoch["proof"]["left_over"] == len(kept)
        assert len(set(epoch["steps"])) == 1, "every rank the same steps"
        by_step: dict[int, list[str]] = {}
        for step, key in records:
            by_step.setdefault(step, []).append(key)
        whole = [keys for keys in by_step.values() if len(keys) % 4 == 0]  # steps without padding: rank by rank, 4 each
        assert whole and all(
            len({shape_of[key] for key in keys[start : start + 4]}) == 1 for keys in whole for start in range(0, len(keys), 4)
        )


@pytest.mark.parametrize(
    "part",
    [
        "not a schedule",
        {"points": [[0, "score < 4"]]},
        {"points": [[0, "score < 4"]], "epoch_filter": 7},
        {"points": [[0, "score < 4"]], "epoch_filter": "colour == 'red'"},
        {"points": [[0, "score < 4"], [0, "score < 5"]], "epoch_filter": "score < 4"},
        {"points": [["0", "score < 4"]], "epoch_filter": None},
        {"points": [[0, "colour == 'red'"]], "epoch_filter": None},
        {"points": [[0, "score < 4"]], "epoch_filter": "__import__('os')"},
        {"points": [[step, "score < 4"] for step in range(2000)], "epoch_filter": None},
    ],
)
def test_a_damaged_schedule_in_a_state_is_refused_by_name(parquet: Path, part: object) -> None:
    first = Loader(ParquetStorage(parquet), batch_size=10)
    first.set_filter_schedule({0: "score < 4"})
    stream = iter(first)
    next(stream)
    state = first.state_dict()
    stream.close()
    state["filter_schedule"] = part
    with pytest.raises(ConfigurationError, match="filter_schedule"):
        Loader(ParquetStorage(parquet), batch_size=10).load_state_dict(state)


def test_a_new_schedule_mid_epoch_keeps_the_epochs_samples_and_its_state(parquet: Path) -> None:
    loader = Loader(ParquetStorage(parquet), batch_size=10, sampling=Sampling(seed=3))
    loader.set_filter_schedule({0: "score < 4"})
    stream = iter(loader)
    first = [key for _ in range(3) for key in next(stream).keys]
    loader.set_filter_schedule({0: "score >= 4"})  # its point 0 is not the epoch's filter
    state = loader.state_dict()
    assert state["filter_schedule"]["epoch_filter"] == "score < 4"
    rest = [key for batch in stream for key in batch.keys]
    assert Counter(first + rest) == Counter({key: 1 for key in keys_kept(RULES[0])})
    resumed = Loader(ParquetStorage(parquet), batch_size=10, sampling=Sampling(seed=3))
    resumed.load_state_dict(state)
    again = [key for batch in resumed for key in batch.keys]
    assert Counter(first + again) == Counter({key: 1 for key in keys_kept(RULES[0])})
    assert Counter(epoch_keys(resumed)) == Counter({key: 1 for key in keys_kept(lambda score, length: score >= 4)})


THRESHOLDS = st.sampled_from([None, "score < 3", "score >= 3", "score < 8 and length >= 500", "length < 1500"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    points=st.dictionaries(st.integers(0, 200), THRESHOLDS, min_size=1, max_size=5),
    batch=st.integers(3, 40),
    world=st.integers(1, 3),
)
def test_any_schedule_gives_each_epoch_the_filter_in_force_when_it_began(parquet: Path, points: dict, batch: int, world: int) -> None:
    rules = {
        None: lambda score, length: True,
        "score < 3": lambda score, length: score < 3,
        "score >= 3": lambda score, length: score >= 3,
        "score < 8 and length >= 500": lambda score, length: score < 8 and length >= 500,
        "length < 1500": lambda score, length: length < 1500,
    }
    storage = ParquetStorage(parquet)
    loaders = [Loader(storage, batch_size=batch, sampling=Sampling(seed=6, rank=rank, world_size=world)) for rank in range(world)]
    for loader in loaders:
        loader.set_filter_schedule(points)
    for _ in range(4):
        began = loaders[0].step
        in_force = [step for step in points if step <= began]
        expression = points[max(in_force)] if in_force else None
        keys: list[str] = []
        steps = set()
        for loader in loaders:
            batches = list(loader)
            steps.add(len(batches))
            keys += [key for batch in batches for key, padding in zip(batch.keys, batch.padding) if not padding]
        assert len(steps) == 1, "every rank takes the same steps"
        assert Counter(keys) == Counter({key: 1 for key in keys_kept(rules[expression])}), f"epoch begun at step {began}"
        assert loaders[0].verify_epoch([loader.state_dict() for loader in loaders])["delivered"] == len(keys)


def test_every_batch_of_filtered_epochs_is_replayed_from_the_ledger(parquet: Path, tmp_path: Path) -> None:
    from stoker.loader import replay

    loader = Loader(ParquetStorage(parquet), batch_size=16, sampling=Sampling(seed=1))
    loader.record_provenance(tmp_path / "ledger")
    loader.set_filter_schedule({0: "score < 4", 12: "score >= 4 and length < 2000"})
    delivered: dict[int, list[str]] = {}
    for _ in range(2):
        for batch in loader:
            delivered[loader.step - 1] = list(batch.keys)
    loader.close()
    assert set(delivered[max(delivered)]) <= keys_kept(RULES[50]), "the second epoch read under the second filter"
    for step, keys in delivered.items():
        assert list(replay(tmp_path / "ledger", step, storage=ParquetStorage(parquet)).keys) == keys, f"step {step}"
