"""Wrong arguments fail when the Loader or transform is made, naming the argument and what it takes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stoker.loader import Loader, Reads, Sampling, Throughput
from stoker.ops import ImageTransform, decode_image
from stoker.storage import MemoryStorage


def _storage() -> MemoryStorage:
    return MemoryStorage({f"k{index}": bytes([index]) for index in range(10)})


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: Loader(_storage(), batch_size="32"), TypeError, r"batch_size must be an int >= 1, got str '32'"),
        (lambda: Loader(_storage(), batch_size=32.0), TypeError, r"batch_size must be an int >= 1, got float 32.0"),
        (lambda: Loader(_storage(), batch_size=True), TypeError, r"batch_size must be an int >= 1, got bool True"),
        (lambda: Loader(_storage(), batch_size=0), ValueError, r"batch_size must be >= 1, got 0"),
        (lambda: Reads(fetch_concurrency=2.5), TypeError, r"fetch_concurrency must be an int >= 1 or None, got float 2.5"),
        (lambda: Throughput(prefetch=-1), ValueError, r"prefetch must be >= 0"),
        (lambda: Sampling(seed="7"), TypeError, r"seed must be an int >= 0, got str '7'"),
        (
            lambda: Loader(_storage(), batch_size=4, transform=(224, 224)),
            TypeError,
            r"transform must be a stoker.ops ImageTransform, AudioTransform or VideoTransform, got tuple",
        ),
        (lambda: Loader(_storage(), batch_size=4, decode="utf-8"), TypeError, r"decode must be a function of a sample's bytes, got str"),
        (lambda: Reads(stall_patience="1s"), TypeError, r"stall_patience must be a number"),
        (lambda: Loader(_storage(), batch_size=4, sampling=Reads()), TypeError, r"sampling must be a stoker.Sampling, got Reads"),
    ],
)
def test_loader_arguments_are_checked_at_construction(make: Callable[[], object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        make()


def test_a_loader_opens_a_path_itself(tmp_path: Path) -> None:
    for name in ("cat", "dog"):
        (tmp_path / "train" / name).mkdir(parents=True)
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "train" / name / "a.png")
    loader = Loader(str(tmp_path / "train") + "/", batch_size=2, sampling=Sampling(shuffle="none"))
    assert sorted(loader.storage.keys) == ["cat/a.png", "dog/a.png"]
    assert [int(label) for batch in loader for label in batch.labels] == [0, 1]
    with pytest.raises(FileNotFoundError, match="missing"):
        Loader(tmp_path / "missing", batch_size=2)
    with pytest.raises(TypeError, match="storage must be a stoker Storage, or a path or URL"):
        Loader(42, batch_size=2)  # type: ignore[arg-type]


def test_crops_take_an_int_for_a_square_as_torchvision_does() -> None:
    image = np.arange(40 * 60 * 3, dtype=np.uint8).reshape(40, 60, 3)
    import io

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    data = buffer.getvalue()
    assert np.array_equal(decode_image(data, ImageTransform(center_crop=20)), decode_image(data, ImageTransform(center_crop=(20, 20))))
    assert np.array_equal(decode_image(data, ImageTransform(center_crop=[20])), decode_image(data, ImageTransform(center_crop=(20, 20))))
    assert decode_image(data, ImageTransform(random_resized_crop=16), seed=1).shape == (16, 16, 3)
    with pytest.raises(TypeError, match=r"center_crop must be an int \(a square\) or \(height, width\) of positive ints, got '224'"):
        ImageTransform(center_crop="224")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"center_crop must be .*got \(1, 2, 3\)"):
        ImageTransform(center_crop=(1, 2, 3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"use resize_shorter=256"):
        ImageTransform(resize=256)  # type: ignore[arg-type]
