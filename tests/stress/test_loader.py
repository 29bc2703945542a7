"""One Loader over local files, its training loop running while other threads take its state,
its snapshot and its totals, with threads switching between almost any two bytecodes: no sample
lost or repeated, every count exact, and every state taken mid-run resumes exactly."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.loader import Sampling, Throughput
from stoker.observe import read_ledger
from stoker.pipeline import TuningDecision
from stoker.storage import FileStorage

pytestmark = pytest.mark.usefixtures("switch_often")

SAMPLES = 64
BATCH = 4
BATCHES = SAMPLES // BATCH
EPOCHS = 4
READERS = 3


def number(data: bytes) -> int:
    return int.from_bytes(data, "little")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SAMPLES files in two class folders, each holding its own number (read by `number`)."""
    root = tmp_path_factory.mktemp("samples")
    for index in range(SAMPLES):
        (root / f"c{index % 2}").mkdir(exist_ok=True)
        (root / f"c{index % 2}" / f"{index:03d}.jpg").write_bytes(index.to_bytes(4, "little"))
    return root


def new_loader(folder: Path, **throughput: Any) -> Loader:
    return Loader(
        FileStorage(folder),
        batch_size=BATCH,
        decode=number,
        sampling=Sampling(seed=7),
        throughput=Throughput(decode_concurrency=4, **throughput),
    )


def hammer(work: Callable[[], None], readers: int = READERS) -> tuple[threading.Event, Callable[[], None]]:
    """Start ``readers`` threads calling ``work`` until told to stop; returns (stop, join), and
    join raises what a reader raised."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            while not stop.is_set():
                work()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, name=f"reader-{index}") for index in range(readers)]
    for thread in threads:
        thread.start()

    def join() -> None:
        stop.set()
        for thread in threads:
            thread.join(30)
        if errors:
            raise errors[0]

    return stop, join


def check_states(folder: Path, states: list[dict[str, Any]], delivered: dict[int, list[int]]) -> None:
    """Each distinct state, loaded in a fresh Loader, reads exactly the samples its epoch had not
    delivered when it was taken: the rest of a prefix of the loop's own order (``delivered``, by
    epoch), none twice; its step counts those samples, and the epoch's proof holds."""
    distinct = list({repr(state): state for state in states}.values())
    for state in distinct:
        epoch = state["sampler"]["epoch"]
        resumed = new_loader(folder)
        resumed.load_state_dict(state)
        rest = [value for batch in resumed for value in batch.data] if resumed.batches_left else []
        done = SAMPLES - len(rest)
        where = f"a state at epoch {epoch}, step {state['step']}"
        assert len(set(rest)) == len(rest), f"{where}: samples read twice after resuming"
        assert set(rest) == set(range(SAMPLES)) - set(delivered.get(epoch, [])[:done]), f"{where}: not the rest of what the loop had read"
        earlier = sum(len(values) for number, values in delivered.items() if number < epoch)
        assert state["step"] == (earlier + done) // BATCH, f"{where}: a step count apart from the samples delivered"
        # Once: the sampler went on to the next epoch before the delivery digest did, and a state
        # taken between held the new epoch's empty record with the old epoch's full digest: here
        # "epoch 0 did not deliver each sample exactly once: 128 deliveries for 64 samples", at
        # every epoch change.
        assert resumed.verify_epoch()["delivered"] == SAMPLES, where


def test_each_state_taken_from_another_thread_resumes_exactly(folder: Path, tmp_path: Path) -> None:
    # The training loop runs EPOCHS epochs (each starts by itself as the loop iterates again)
    # while a checkpoint thread takes states.
    loader = new_loader(folder)
    loader.record_provenance(tmp_path / "ledger")
    states: list[dict[str, Any]] = []
    _, join = hammer(lambda: states.append(loader.state_dict()), readers=1)
    delivered: dict[int, list[int]] = {}
    try:
        for epoch in range(EPOCHS):
            delivered[epoch] = [value for batch in loader for value in batch.data]
    finally:
        join()
        loader.close()
    assert all(sorted(values) == list(range(SAMPLES)) for values in delivered.values()), "each epoch: every sample once"
    assert loader.step == EPOCHS * BATCHES and loader.totals.batches == EPOCHS * BATCHES
    ledger = read_ledger(tmp_path / "ledger")
    assert sorted(ledger.column("step").to_pylist()) == sorted(step for step in range(EPOCHS * BATCHES) for _ in range(BATCH))

    assert len({repr(state) for state in states}) >= EPOCHS, "states were taken all along the run"
    check_states(folder, states, delivered)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(st.integers(0, BATCHES), st.booleans()), min_size=2, max_size=5))
def test_a_loop_that_stops_goes_on_and_changes_epoch_keeps_every_state_exact(folder: Path, runs: list[tuple[int, bool]]) -> None:
    # Hypothesis draws how the loop runs: each run reads some batches and breaks (the batches in
    # flight were not delivered: the next run reads them), or reads to the end of the epoch; and
    # may start the next epoch itself (`set_epoch`) before the run. A checkpoint thread takes
    # states throughout; each must resume exactly.
    loader = new_loader(folder)
    states: list[dict[str, Any]] = []
    _, join = hammer(lambda: states.append(loader.state_dict()), readers=1)
    delivered: dict[int, list[int]] = {}
    try:
        for batches, next_epoch in runs:
            if next_epoch:
                loader.set_epoch(loader.sampler.epoch + 1)
            for count, batch in enumerate(loader, start=1):
                delivered.setdefault(loader.sampler.epoch, []).extend(batch.data)
                if count == batches:
                    break
    finally:
        join()
    assert all(len(set(values)) == len(values) for values in delivered.values()), "no sample twice in an epoch"
    check_states(folder, states, delivered)


def test_snapshots_and_totals_read_from_other_threads_count_every_batch_once(folder: Path) -> None:
    # Readers (a metrics scrape, a logging thread) take snapshots and totals while epochs start
    # and end: a batch counted in the finished epochs' totals must not be counted again in the
    # running epoch's stats, a copy of the totals is whole (its batches and its stages' items
    # agree), and every count is exact at the end. Once: an epoch's counts joined the totals
    # before its pipeline stopped being the running one, and every snapshot between counted the
    # epoch twice ("32 batches shown after 16 delivered", at each epoch's end); `totals` was the
    # live object the next epoch added to.
    loader = new_loader(folder)
    problems: list[str] = []

    def read() -> None:
        snapshot = loader.snapshot()
        shown = snapshot.totals.batches + (snapshot.running.items_consumed if snapshot.running else 0)
        step = loader.step
        if shown > step + 1:  # the pipeline counts a batch taken just before the Loader records it
            problems.append(f"{shown} batches shown after {step} delivered")
        totals = loader.totals
        if (totals.batches % BATCHES, totals.stage_items["decode"]) != (0, totals.batches):
            problems.append(f"torn totals: {totals.batches} batches, {totals.stage_items['decode']} decoded")

    _, join = hammer(read)
    try:
        for _ in range(EPOCHS):
            for _ in loader:
                pass
    finally:
        join()
    assert not problems, problems[:5]
    snapshot = loader.snapshot()
    assert (snapshot.totals.batches, snapshot.running, snapshot.step) == (EPOCHS * BATCHES, None, EPOCHS * BATCHES)
    assert snapshot.stage_totals()["decode"][0] == EPOCHS * BATCHES


def test_the_tuners_moves_are_read_while_it_makes_them(folder: Path) -> None:
    # The live tuner appends its moves on the pipeline's scheduler thread while `stats` and
    # `snapshot` count them on others. The appends here stand in for the tuner's (which moves
    # only once a window), so that there are many while the readers read. Once: `snapshot`
    # counted the moves with a generator over the deque itself, and raised "RuntimeError: deque
    # mutated during iteration" (2 runs of 3).
    loader = new_loader(folder, autotune=True)
    tuning = loader._tuning
    assert tuning is not None
    made = 3_000

    def read() -> None:
        loader.snapshot()
        loader.stats()

    _, join = hammer(read)
    try:
        for index in range(made):
            tuning.decisions.append(TuningDecision(float(index), "prefetch", index, index + 1, "stress"))
        for _ in loader:
            pass
    finally:
        join()
    moves = tuning.moves()
    assert len(moves) == 1000, "the last 1,000 moves are kept"
    assert sum(loader.snapshot().tuning_moves.values()) == len(moves)
    assert len(loader.stats().tuning) == len(moves)  # type: ignore[union-attr]


def mixture_loader() -> Loader:
    from stoker.storage import MemoryStorage, MixedStorage

    big = MemoryStorage({f"b{index}": b"big" for index in range(500)})
    small = MemoryStorage({f"s{index}": b"small" for index in range(100)})
    mixture = MixedStorage({"big": big, "small": small}, {"big": 0.7, "small": 0.3}, num_samples=320, seed=5)
    return Loader(mixture, batch_size=8, sampling=Sampling(seed=2, in_order=True))


def test_a_state_taken_while_a_scheduled_mixture_change_is_applied_resumes_the_same_stream() -> None:
    # A curriculum's points apply between two batches (the pipeline is stopped and built again
    # over the new draw) while a checkpoint thread takes states: each state, resumed without the
    # schedule (it carries it), must go on with the very batches the run went on with. Once: a
    # point was marked applied when it fell due, before its weights were applied after the
    # pipeline stopped, and a state between carried the point as applied with the old weights.
    loader = mixture_loader()
    loader.set_mixture_schedule({0: {"big": 0.7, "small": 0.3}, 10: {"big": 0.2, "small": 0.8}, 25: {"big": 0.5, "small": 0.5}})
    states: list[dict[str, Any]] = []
    _, join = hammer(lambda: states.append(loader.state_dict()), readers=1)
    try:
        stream = [list(batch.keys) for batch in loader]
    finally:
        join()
    distinct = list({repr(state): state for state in states}.values())
    assert len(distinct) >= 3, "states were taken all along the run"
    for state in distinct:
        resumed = mixture_loader()
        resumed.load_state_dict(state)
        rest = [list(batch.keys) for batch in resumed] if resumed.batches_left else []
        assert rest == stream[state["step"] :], f"a state at step {state['step']} resumed another stream"
