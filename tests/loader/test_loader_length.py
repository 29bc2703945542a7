"""`len(loader)` is this rank's epoch in batches, as torch's `len(DataLoader)` is: the same before,
during and after an epoch and after a mid-epoch resume; `batches_left` is what remains of it (len
once counted only that: 0 after an epoch, to a torch user an empty loader)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage


@settings(max_examples=30, deadline=None)
@given(
    count=st.integers(1, 60),
    batch_size=st.integers(1, 16),
    drop_last=st.booleans(),
    stop=st.integers(0, 70),
    rank=st.sampled_from([(0, 1), (1, 2), (2, 3)]),
    in_order=st.booleans(),
)
def test_len_is_the_epochs_batches_and_batches_left_the_rest(
    count: int, batch_size: int, drop_last: bool, stop: int, rank: tuple[int, int], in_order: bool
) -> None:
    storage = MemoryStorage({f"k{index}": index.to_bytes(2, "little") for index in range(count)})

    def loader() -> Loader:
        sampling = Sampling(seed=7, rank=rank[0], world_size=rank[1], in_order=in_order)
        return Loader(storage, batch_size=batch_size, drop_last=drop_last, sampling=sampling, decode=lambda data: data)

    samples = -(-count // rank[1])  # this rank's, padded to equal counts
    epoch = samples // batch_size if drop_last else -(-samples // batch_size)  # torch's len(DataLoader)
    first = loader()
    assert len(first) == epoch and first.batches_left == epoch
    batches = iter(first)
    taken = 0
    try:
        for _ in range(min(stop, epoch)):
            next(batches)
            taken += 1
            assert len(first) == epoch and first.batches_left == epoch - taken
        state = first.state_dict()
    finally:
        batches.close()  # the pipeline stops, also when an assertion failed
    resumed = loader()
    resumed.load_state_dict(state)
    assert len(resumed) == epoch and resumed.batches_left == epoch - taken
    if taken < epoch:  # (iterating a finished epoch's loader starts the next epoch)
        assert sum(1 for _ in resumed) == epoch - taken
    assert len(resumed) == epoch and resumed.batches_left == 0, "a finished epoch is still counted whole"
