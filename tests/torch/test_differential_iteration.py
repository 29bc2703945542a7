"""Differential, iteration half: torch's DataLoader and stoker's, with the same arguments and the
same seeds, give the same batches, raise the same exceptions at the same steps (type and first
line), and say the same warnings, pass after pass (`differential.outcomes`).

The behaviours that deliberately differ are pinned at the end of this file and listed in
docs/torch.md.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import BatchSampler, RandomSampler  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

from stoker.torch import DataLoader  # noqa: E402

from . import differential as d  # noqa: E402


def _collate_labels(items: list[Any]) -> list[Any]:
    return sorted(label for _, label in items)


# name: (dataset factory, DataLoader arguments (or a function making them afresh: a generator or a
# sampler has a state of its own), passes)
CASES: dict[str, tuple[Callable[[], Any], dict[str, Any] | Callable[[], dict[str, Any]], int]] = {
    "in order, no workers": (d.Numbers, {"batch_size": 4}, 1),
    "in order, workers": (d.Numbers, {"batch_size": 4, "num_workers": 2}, 1),
    "shuffle from the global generator": (d.Numbers, {"batch_size": 5, "shuffle": True, "num_workers": 2}, 2),
    "shuffle from a generator": (
        d.Numbers,
        lambda: {"batch_size": 5, "shuffle": True, "generator": torch.Generator().manual_seed(3), "num_workers": 2},
        2,
    ),
    "drop_last": (d.Numbers, {"batch_size": 5, "drop_last": True, "num_workers": 2}, 1),
    "no batching": (d.Numbers, {"batch_size": None, "num_workers": 2}, 1),
    "no batching, no workers": (d.Numbers, {"batch_size": None}, 1),
    "a batch sampler": (
        d.Numbers,
        lambda: {
            "batch_sampler": BatchSampler(RandomSampler(range(23), generator=torch.Generator().manual_seed(1)), 6, False),
            "num_workers": 2,
        },
        2,
    ),
    "a sampler and a collate_fn": (d.Numbers, {"batch_size": 4, "sampler": [3, 1, 4, 1, 5, 9, 2, 6], "collate_fn": _collate_labels}, 1),
    "__getitems__": (d.Batched, {"batch_size": 4, "num_workers": 2}, 1),
    "a random_split subset, augmented": (d.augmented_split, {"batch_size": 4, "shuffle": True, "num_workers": 2}, 2),
    "random augmentation, no workers": (d.Augmented, {"batch_size": 4, "shuffle": True}, 2),
    "random augmentation, workers": (d.Augmented, {"batch_size": 4, "shuffle": True, "num_workers": 2}, 2),
    "random augmentation that waits": (d.SlowAugmented, {"batch_size": 8, "shuffle": True, "num_workers": 2}, 2),
    "random augmentation, persistent workers": (
        d.Augmented,
        {"batch_size": 4, "shuffle": True, "num_workers": 2, "persistent_workers": True},
        3,
    ),
    "random augmentation, spawn": (d.Augmented, {"batch_size": 4, "num_workers": 2, "multiprocessing_context": "spawn"}, 1),
    "worker info and seeds": (d.WorkerFacts, {"batch_size": 3, "num_workers": 2}, 2),
    "worker info, persistent": (d.WorkerFacts, {"batch_size": 3, "num_workers": 2, "persistent_workers": True}, 2),
    "worker info, forkserver": (d.WorkerFacts, {"batch_size": 3, "num_workers": 2, "multiprocessing_context": "forkserver"}, 1),
    "prefetch_factor 1": (d.WorkerFacts, {"batch_size": 2, "num_workers": 3, "prefetch_factor": 1}, 1),
    "worker_init_fn prepares the worker's copy": (
        d.NeedsItsWorker,
        {"batch_size": 4, "num_workers": 2, "worker_init_fn": d.prepare_worker},
        1,
    ),
    "worker_init_fn raises": (d.Numbers, {"batch_size": 2, "num_workers": 2, "worker_init_fn": d.failing_init}, 1),
    "errors, no workers": (d.Failing, {"batch_size": 4}, 2),
    "errors, workers (and what follows them)": (d.Failing, {"batch_size": 4, "num_workers": 2}, 2),
    "errors, no batching": (d.Failing, {"batch_size": None, "num_workers": 2}, 1),
    "pin_memory without an accelerator": (d.Numbers, {"batch_size": 4, "pin_memory": True, "num_workers": 1}, 1),
    "an iterable dataset sharded by its workers": (d.Shards, {"batch_size": 4, "num_workers": 3}, 2),
    "an iterable dataset longer than its len": (lambda: d.Shards(30, declared=10), {"batch_size": None}, 1),
    "an iterable dataset without batching": (d.Shards, {"batch_size": None, "num_workers": 2}, 1),
    "an IterDataPipe shuffled by the loader": (d.shuffled_datapipe, {"batch_size": 3, "shuffle": True}, 2),
    "an IterDataPipe shuffled by the loader, workers": (d.shuffled_datapipe, {"batch_size": 3, "shuffle": True, "num_workers": 2}, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_pass_goes_as_under_torch(name: str) -> None:
    make_dataset, arguments, passes = CASES[name]
    fresh = arguments if callable(arguments) else arguments.copy
    theirs = d.outcomes(lambda: TorchDataLoader(make_dataset(), **fresh()), passes)
    ours = d.outcomes(lambda: DataLoader(make_dataset(), **fresh()), passes)
    assert ours == theirs


@pytest.mark.parametrize("unordered", [False, True])
def test_out_of_order_delivery_delivers_the_same_batches(unordered: bool) -> None:
    # Out of order, torch gives a batch to whichever worker has room, so which worker (and so
    # which seed) makes a batch depends on timing, under torch as here: compared without it.
    arguments = {"batch_size": 2, "num_workers": 2, "in_order": not unordered, "shuffle": True}
    theirs = d.outcomes(lambda: TorchDataLoader(d.Numbers(), **arguments))
    ours = d.outcomes(lambda: DataLoader(d.Numbers(), **arguments))
    assert sorted(map(repr, ours)) == sorted(map(repr, theirs))


def test_persistent_workers_keep_their_copy_of_the_dataset() -> None:
    def run(loader_type: type) -> list[Any]:
        dataset = d.Offset(8)

        def bump() -> None:
            dataset.offset += 100

        return d.outcomes(lambda: loader_type(dataset, batch_size=4, num_workers=2, persistent_workers=True), 2, between_epochs=bump)

    assert run(DataLoader) == run(TorchDataLoader)


def test_the_timeout_is_torchs() -> None:
    theirs = d.outcomes(lambda: TorchDataLoader(d.Slow(12), batch_size=2, num_workers=1, timeout=0.5), max_errors=1)
    ours = d.outcomes(lambda: DataLoader(d.Slow(12), batch_size=2, num_workers=1, timeout=0.5), max_errors=1)
    assert ours == theirs
    assert ("raised at next", "RuntimeError", "DataLoader timed out after 0.5 seconds") in ours


@pytest.mark.parametrize("how", ["SIGSEGV", "SIGKILL", "exit"])
def test_a_dead_worker_is_named_and_the_process_lives(how: str) -> None:
    """When the main process notices a dead worker depends on timing (torch's SIGCHLD handler or
    its periodic check, after zero or more good batches), under torch as here: so both are held
    to what they promise rather than to one sequence."""
    healthy = d.outcomes(lambda: TorchDataLoader(d.Numbers(40), batch_size=4, num_workers=2))
    for loader_type in (TorchDataLoader, DataLoader):
        seen = d.outcomes(lambda: loader_type(d.Dying(how), batch_size=4, num_workers=2), max_errors=1)  # noqa: B023
        failure = next(position for position, outcome in enumerate(seen) if outcome[0] == "raised at next")
        assert seen[1:failure] == healthy[1:failure], "batches before the failure are real ones"
        kind, message = seen[failure][1:]
        assert kind == "RuntimeError"
        assert message.startswith("DataLoader worker (pid N) ") and ("is killed by signal" in message or "exited unexpectedly" in message)
        if how == "SIGSEGV" and "signal:" in message:
            assert message.startswith("DataLoader worker (pid N) is killed by signal: Segmentation fault")
        if loader_type is DataLoader and how != "exit":  # torch's words for a signal, whichever noticed first
            signal_name = "Segmentation fault" if how == "SIGSEGV" else "Killed"
            assert message.startswith(f"DataLoader worker (pid N) is killed by signal: {signal_name}. ["), message
        if loader_type is DataLoader:  # deliberately more: which worker, and how it ended
            ending = {"SIGSEGV": "was killed by signal SIGSEGV (Segmentation fault)", "SIGKILL": "was killed by signal SIGKILL (Killed)"}
            assert message.endswith(f"[worker 1 of 2 (pid N) {ending.get(how, 'exited with status 3')}]"), message
    assert not multiprocessing.active_children(), "no worker is left behind"


# ---- deliberately different (docs/torch.md) ------------------------------------------------------


def test_an_error_names_the_item_that_raised_it() -> None:
    """torch's message says which worker; stoker's also says which item."""
    with pytest.raises(ValueError, match="Caught ValueError in DataLoader worker process") as raised:
        next(iter(DataLoader(d.Failing(), batch_size=4, sampler=[0, 5], num_workers=1)))
    assert "(raised by dataset[5] in stoker.torch.DataLoader)" in str(raised.value)


def test_threads_share_the_generators_and_say_so() -> None:
    with pytest.warns(UserWarning, match="not repeatable run to run with worker_kind='threads'"):
        list(DataLoader(d.Augmented(), batch_size=4, num_workers=2, worker_kind="threads"))


def test_threads_have_no_worker_info() -> None:
    batches = list(DataLoader(d.WorkerFacts(6), batch_size=3, num_workers=2, worker_kind="threads"))
    assert [row[1][1] for row in d.plain(batches)] == [[-1, -1, -1], [-1, -1, -1]]


def test_a_thread_whose_worker_init_fn_failed_fails_each_of_its_batches() -> None:
    """torch's worker process fails its first batch with the init error and then each later
    one with an UnboundLocalError of its own code; a stoker thread repeats the init error."""
    ours = d.outcomes(lambda: DataLoader(d.Numbers(8), batch_size=2, num_workers=2, worker_init_fn=d.failing_init, worker_kind="threads"))
    raised = [outcome for outcome in ours if outcome[0] == "raised at next"]
    assert raised == [("raised at next", "OSError", "Caught OSError in DataLoader worker thread 1.")] * 2


THREADS_MATCH = [
    name
    for name, (make_dataset, arguments, _) in CASES.items()
    if make_dataset in (d.Numbers, d.Batched, d.Failing)
    and name != "worker_init_fn raises"  # pinned below: deliberately different
    and "multiprocessing_context" not in (arguments if isinstance(arguments, dict) else arguments())
]


@pytest.mark.parametrize("name", THREADS_MATCH)
def test_worker_threads_give_torchs_batches_and_errors(name: str) -> None:
    """Where nothing depends on the worker's process (its random state, its worker info), worker
    threads give what torch's processes give; their errors say "thread" for "process"."""
    make_dataset, arguments, passes = CASES[name]
    fresh = arguments if callable(arguments) else arguments.copy
    theirs = d.outcomes(lambda: TorchDataLoader(make_dataset(), **fresh()), passes)
    ours = d.outcomes(lambda: DataLoader(make_dataset(), worker_kind="threads", **fresh()), passes)
    assert repr(ours).replace("worker thread", "worker process") == repr(theirs)
