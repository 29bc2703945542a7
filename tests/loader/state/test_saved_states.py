"""States saved by an earlier stoker still load, and the run goes on as it went on then.

Each case in ``saved_states/`` was written by ``python tests/loader/state/test_saved_states.py``
on 3 December 2026 (main at 38ceef5, before the saved parts were registered): a Loader built by
the case's function below, run some batches (changing its mixture or leaving batches out on the
way), its `state_dict`, and the keys the same run delivered after it to the end of the epoch.
The test builds the same Loader again, loads the saved state, and must deliver those keys in that
order. A change to how states are written or read that breaks old checkpoints fails here; do
not write the files again to make it pass (add a case instead)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage, MixedStorage

SAVED = Path(__file__).parent / "saved_states"


def _memory(prefix: str, count: int) -> MemoryStorage:
    return MemoryStorage({f"{prefix}{index:03d}": bytes([index % 256]) * 3 for index in range(count)})


def _plain() -> Loader:
    return Loader(_memory("k", 90), batch_size=4, sampling=Sampling(seed=5, in_order=True))


def _mixture() -> Loader:
    mixture = MixedStorage({"web": _memory("w", 60), "books": _memory("b", 40)}, weights={"web": 0.5, "books": 0.5}, seed=3)
    return Loader(mixture, batch_size=4, sampling=Sampling(seed=7, in_order=True))


def _ranks(rank: int) -> Loader:
    return Loader(_memory("r", 70), batch_size=3, sampling=Sampling(seed=9, in_order=True, rank=rank, world_size=2))


def _run(loader: Loader, batches: int, between: Callable[[Loader, int], None] = lambda loader, step: None) -> Iterator[Any]:
    iterator = iter(loader)
    for step in range(batches):
        between(loader, step)
        next(iterator)
    return iterator


def _mixture_changed(loader: Loader, step: int) -> None:
    if step == 0:
        loader.set_mixture_schedule({0: {"web": 0.5, "books": 0.5}, 4: {"web": 0.8, "books": 0.2}})
    if step == 6:
        loader.set_mixture_weights({"web": 0.3, "books": 0.7})


def _steps_left_out(loader: Loader, step: int) -> None:
    if step == 3:
        loader.exclude(steps=range(5, 7))


def _keys_left_out(loader: Loader, step: int) -> None:
    if step == 2:
        loader.exclude(keys=[f"k{index:03d}" for index in range(0, 90, 7)])


# case name -> (how the Loader is built, how many batches before the state, what the run did between them)
CASES: dict[str, tuple[Callable[[], Loader], int, Callable[[Loader, int], None]]] = {
    "plain": (_plain, 6, lambda loader, step: None),
    "mixture-schedule-and-weights": (_mixture, 9, _mixture_changed),
    "steps-left-out": (_plain, 8, _steps_left_out),
    "keys-left-out": (_plain, 5, _keys_left_out),
}


def _keys_after(loader: Loader, iterator: Iterator[Any]) -> list[str]:
    return [key for batch in iterator for key, padding in zip(batch.keys, batch.padding) if not padding]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_state_saved_by_an_earlier_stoker_resumes_as_that_run_went_on(name: str) -> None:
    saved = json.loads((SAVED / f"{name}.json").read_text())
    make, _, _ = CASES[name]
    loader = make()
    loader.load_state_dict(saved["state"])
    assert _keys_after(loader, iter(loader)) == saved["rest"]
    assert loader.verify_epoch()["samples"] > 0


def test_two_ranks_states_saved_by_an_earlier_stoker_resume_on_each_rank() -> None:
    saved = json.loads((SAVED / "two-ranks.json").read_text())
    for rank in (0, 1):
        loader = _ranks(rank)
        loader.load_state_dict(saved["states"])
        assert _keys_after(loader, iter(loader)) == saved["rest"][rank]


def _write() -> None:
    """Write the cases' files (run by hand once; see the module's docstring)."""
    SAVED.mkdir(exist_ok=True)
    for name, (make, batches, between) in CASES.items():
        loader = make()
        iterator = _run(loader, batches, between)
        state = loader.state_dict()
        rest = _keys_after(loader, iterator)
        (SAVED / f"{name}.json").write_text(json.dumps({"state": state, "rest": rest}, indent=1) + "\n")
    loaders = [_ranks(rank) for rank in (0, 1)]
    iterators = [_run(loader, 4) for loader in loaders]
    states = [loader.state_dict() for loader in loaders]
    rest = [_keys_after(loader, iterator) for loader, iterator in zip(loaders, iterators)]
    (SAVED / "two-ranks.json").write_text(json.dumps({"states": states, "rest": rest}, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/loader/state/test_saved_states.py --write  (only to add a case)")
    _write()
