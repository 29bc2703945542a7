"""`RayLoader` when things go wrong, on a real local Ray cluster: preprocessing that raises on one
row stops the loop with the row named and only delivered rows recorded; rows of different
shapes, a missing column and a mid-epoch resume Ray cannot make exact are clear errors; a loop
that stops early leaves no thread behind (the autouse fixture checks every test)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray")


def rows(count: int, shape: tuple[int, ...] = (4, 4)) -> Any:
    items = [{"key": f"sample-{index:03d}", "label": index % 5, "image": np.full(shape, index, dtype=np.uint8)} for index in range(count)]
    return ray.data.from_items(items, override_num_blocks=4)


def test_preprocessing_that_raises_names_the_row_and_records_only_what_was_delivered(ray_cluster: str) -> None:
    from stoker.ray import RayLoader

    def fails_on_one(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if "sample-037" in batch["key"].tolist():
            raise ValueError("cannot preprocess sample-037")
        return batch

    loader = RayLoader(rows(48).map_batches(fails_on_one, batch_format="numpy", batch_size=4), batch_size=4)
    delivered: list[str] = []
    with pytest.raises(Exception, match="sample-037"):
        for batch in loader:
            delivered += batch.keys
    assert "sample-037" not in delivered
    assert loader.state_dict()["rows"] == len(delivered), "nothing undelivered is recorded as delivered"
    assert loader.epoch == 0, "a failed epoch is not counted as finished"


def test_rows_of_different_shapes_are_refused_naming_the_column_and_batch(ray_cluster: str) -> None:
    from stoker.ray import RayLoader

    items = [{"key": f"k{index}", "image": np.zeros((4, 4 + index % 2), dtype=np.uint8)} for index in range(8)]
    loader = RayLoader(ray.data.from_items(items), batch_size=4)
    # Ray hands blocks over in whatever order they finish: the first batch starts at k0 or at k4.
    with pytest.raises(ValueError, match=r"column 'image' has rows of different shapes .* 'k[04]'"):
        list(loader)


def test_a_missing_data_column_names_the_columns_there_are(ray_cluster: str) -> None:
    from stoker.ray import RayLoader

    with pytest.raises(KeyError, match=r"no column 'pixels' .*'image'"):
        list(RayLoader(rows(8), batch_size=4, data_column="pixels"))


def test_a_loop_stopped_early_records_its_rows_and_an_unordered_epoch_starts_over_saying_so(
    ray_cluster: str, caplog: pytest.LogCaptureFixture
) -> None:
    from stoker.ray import RayLoader

    loader = RayLoader(rows(40), batch_size=4, prefetch=2)
    for number, _ in enumerate(loader):
        if number == 2:
            break
    assert loader.state_dict() == {"version": 1, "epoch": 0, "rows": 12, "batch_size": 4}
    # Ray's order is not kept: skipping 12 rows could lose or repeat samples, so the epoch
    # starts over, and says so.
    with caplog.at_level("WARNING", logger="stoker.ray"):
        again = [key for batch in loader for key in batch.keys]
    assert sorted(again) == [f"sample-{index:03d}" for index in range(40)]
    assert any("starts over" in record.getMessage() for record in caplog.records)
    assert loader.state_dict() == {"version": 1, "epoch": 1, "rows": 0, "batch_size": 4}


def test_a_mid_epoch_resume_is_refused_where_ray_does_not_keep_the_order(ray_cluster: str) -> None:
    from stoker.ray import RayLoader

    context = ray.data.DataContext.get_current()
    assert not context.execution_options.preserve_order, "Ray's default"
    loader = RayLoader(rows(8), batch_size=4)
    with pytest.raises(ValueError, match="preserve_order"):
        loader.load_state_dict({"version": 1, "epoch": 0, "rows": 4, "batch_size": 4})
    context.execution_options.preserve_order = True
    try:
        shuffled = RayLoader(rows(8), batch_size=4, local_shuffle_buffer_size=8)  # no seed: a new order each time
        with pytest.raises(ValueError, match="preserve_order"):
            shuffled.load_state_dict({"version": 1, "epoch": 0, "rows": 4, "batch_size": 4})
        RayLoader(rows(8), batch_size=4, local_shuffle_buffer_size=8, local_shuffle_seed=1).load_state_dict(
            {"version": 1, "epoch": 0, "rows": 4, "batch_size": 4}
        )
    finally:
        context.execution_options.preserve_order = False
    loader.load_state_dict({"version": 1, "epoch": 3, "rows": 0, "batch_size": 4})  # an epoch boundary is exact
    assert loader.epoch == 3
    with pytest.raises(ValueError, match="batch_size 8"):
        loader.load_state_dict({"version": 1, "epoch": 0, "rows": 0, "batch_size": 8})


def test_what_is_not_a_ray_dataset_is_refused() -> None:
    from stoker.ray import RayLoader

    with pytest.raises(TypeError, match="Dataset or DataIterator"):
        RayLoader([1, 2, 3], batch_size=2)
    with pytest.raises(ValueError, match="positive"):
        RayLoader(type("Fake", (), {"iter_batches": lambda self: None})(), batch_size=0)
