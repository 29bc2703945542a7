"""Differential: torch's DataLoader and stoker's, built with the same arguments, raise the same
exception (type and message), warn the same warnings, and give the same batches.

This file covers construction and the object's contract (arguments, start methods, assignment
after construction, typing); iteration semantics are in test_fidelity.py.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import BatchSampler, Dataset, IterableDataset, SequentialSampler  # noqa: E402

from stoker.torch import DataLoader  # noqa: E402


class Squares(Dataset):
    """Deterministic items: index -> index squared, and the pid that fetched it."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> tuple[int, int]:
        return index * index, os.getpid()


class Stream(IterableDataset):
    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(range(6))


# Warnings of the environment, not of a DataLoader: JAX (once another test imported it) warns at
# every os.fork(), which torch's worker processes do and threads do not; and a ResourceWarning is
# the garbage collector's report of an earlier test's object, collected whenever a collection
# happens to run (a run saw "unclosed event loop" inside one of these).
_NOT_THE_LOADERS = ("os.fork() was called",)


def _outcome(make: Any) -> tuple[str, str, list[str]]:
    """(exception type, message, warnings) of building a loader; ("", "", warnings) if it builds."""

    def said() -> list[str]:
        return [
            str(warning.message)
            for warning in caught
            if not str(warning.message).startswith(_NOT_THE_LOADERS) and not issubclass(warning.category, ResourceWarning)
        ]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            make()
        except Exception as error:  # noqa: BLE001 - the point is to compare whatever is raised
            return type(error).__name__, str(error), said()
    return "", "", said()


CASES: dict[str, dict[str, Any]] = {
    "negative workers": {"num_workers": -1},
    "negative timeout": {"timeout": -1},
    "prefetch without workers": {"prefetch_factor": 2},
    "negative prefetch": {"num_workers": 1, "prefetch_factor": -1},
    "persistent without workers": {"persistent_workers": True},
    "start method without workers": {"multiprocessing_context": "spawn"},
    "unknown start method": {"num_workers": 1, "multiprocessing_context": "thread"},
    "a start method of the wrong type": {"num_workers": 1, "multiprocessing_context": 3},
    "sampler and shuffle": {"sampler": [0, 1], "shuffle": True},
    "batch sampler and batch size": {"batch_sampler": [[0, 1]], "batch_size": 4},
    "batch sampler and drop_last": {"batch_sampler": [[0, 1]], "drop_last": True},
    "no batching and drop_last": {"batch_size": None, "drop_last": True},
    "batch size zero": {"batch_size": 0},
    "batch size as text": {"batch_size": "4"},
    "more workers than cores": {"num_workers": (os.cpu_count() or 1) + 3},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_construction_raises_and_warns_as_torch(name: str) -> None:
    arguments = CASES[name]
    ours = _outcome(lambda: DataLoader(Squares(), **arguments))
    theirs = _outcome(lambda: torch.utils.data.DataLoader(Squares(), **arguments))
    assert ours == theirs


@pytest.mark.parametrize(
    "arguments",
    [{"shuffle": True}, {"sampler": SequentialSampler(range(6))}, {"batch_sampler": BatchSampler(SequentialSampler(range(6)), 2, False)}],
    ids=["shuffle", "sampler", "batch_sampler"],
)
def test_an_iterable_dataset_refuses_an_order_as_torch(arguments: dict[str, Any]) -> None:
    ours = _outcome(lambda: DataLoader(Stream(), **arguments))
    theirs = _outcome(lambda: torch.utils.data.DataLoader(Stream(), **arguments))
    assert ours == theirs and ours[0] == "ValueError"


@pytest.mark.parametrize("attribute", ["batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"])
def test_fixed_attributes_cannot_be_set_after_construction(attribute: str) -> None:
    ours = _outcome(lambda: setattr(DataLoader(Squares(), batch_size=2), attribute, None))
    theirs = _outcome(lambda: setattr(torch.utils.data.DataLoader(Squares(), batch_size=2), attribute, None))
    assert ours == theirs == ("ValueError", f"{attribute} attribute should not be set after DataLoader is initialized", [])
    loader = DataLoader(Squares(), batch_size=2)
    loader.num_workers = 0  # the others may change, as under torch
    assert [batch[0].tolist() for batch in loader][:2] == [[0, 1], [4, 9]]


def test_the_class_is_generic_as_torch() -> None:
    assert DataLoader[int] is not None and torch.utils.data.DataLoader[int] is not None


@pytest.mark.parametrize("context", ["spawn", multiprocessing.get_context("forkserver")], ids=["spawn", "forkserver context"])
def test_a_start_method_fetches_in_worker_processes_with_the_same_batches(context: Any) -> None:
    ours = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context=context)
    theirs = torch.utils.data.DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context=context)
    our_batches = list(ours)
    assert [batch[0].tolist() for batch in our_batches] == [batch[0].tolist() for batch in theirs]
    assert all(pid != os.getpid() for batch in our_batches for pid in batch[1].tolist()), "fetched in worker processes"
    assert isinstance(ours.multiprocessing_context, multiprocessing.context.BaseContext)
    assert ours.multiprocessing_context.get_start_method() == theirs.multiprocessing_context.get_start_method()


def test_in_order_and_pin_memory_device_are_taken_as_torch_takes_them() -> None:
    ours = DataLoader(Squares(), batch_size=5, in_order=False, pin_memory_device="")
    theirs = torch.utils.data.DataLoader(Squares(), batch_size=5, in_order=False, pin_memory_device="")
    assert [batch[0].tolist() for batch in ours] == [batch[0].tolist() for batch in theirs]
    assert ours.in_order is False and ours.pin_memory_device == ""


@pytest.mark.parametrize("kind", [Squares, Stream], ids=["map-style", "iterable"])
def test_the_worker_count_warning_comes_as_often_as_under_torch(kind: type) -> None:
    workers = (os.cpu_count() or 1) + 1

    def one_pass(loader_class: Any) -> None:
        for _ in loader_class(kind(), batch_size=2, num_workers=workers):
            break

    assert _outcome(lambda: one_pass(DataLoader)) == _outcome(lambda: one_pass(torch.utils.data.DataLoader))
