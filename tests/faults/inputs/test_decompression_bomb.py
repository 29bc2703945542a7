"""A small file that declares a huge image is refused before any pixel memory is allocated, with
an error naming the sample; the limit is Pillow's by default and set per transform."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from stoker import Loader
from stoker.loader import FailurePolicy
from stoker.ops import ImageDecodeError, ImageTransform, decode_batch, decode_image
from stoker.storage import MemoryStorage
from stoker_testbed.data.images import encode, jpeg


def declaring(width: int, height: int) -> bytes:
    """A real JPEG whose frame header is rewritten to declare ``width`` x ``height``."""
    data = bytearray(encode(Image.new("RGB", (64, 64), (40, 90, 200)), "JPEG", quality=90))
    marker = data.index(b"\xff\xc0")  # baseline frame header: length, precision, height, width
    data[marker + 5 : marker + 7] = height.to_bytes(2, "big")
    data[marker + 7 : marker + 9] = width.to_bytes(2, "big")
    return bytes(data)


def png_declaring(width: int, height: int) -> bytes:
    """A genuine PNG of ``width`` x ``height`` black pixels: it compresses to almost nothing."""
    return encode(Image.new("L", (width, height)), "PNG", optimize=True)


def test_default_limit_is_pillows_and_names_the_sample() -> None:
    bomb = declaring(16384, 16384)
    assert len(bomb) < 2000
    assert ImageTransform().max_pixels == Image.MAX_IMAGE_PIXELS
    with pytest.raises(ImageDecodeError, match=r"bomb\.jpg.*16384x16384 = 268435456 pixels is over the limit of 89478485"):
        decode_image(bomb, name="bomb.jpg")
    with pytest.raises(Image.DecompressionBombError):  # Pillow refuses the same file
        Image.open(io.BytesIO(bomb)).load()


def test_a_genuine_bomb_is_refused_and_a_raised_limit_decodes_it() -> None:
    bomb = png_declaring(10000, 9000)  # 90 M pixels: just over the default limit
    assert len(bomb) < 200_000
    batch = decode_batch([bomb, jpeg(32, 32)], ImageTransform(resize=(8, 8)), names=["big.png", "ok.jpg"], on_error="zero")
    assert batch.valid.tolist() == [False, True] and "big.png" in batch.failures[0].describe()
    image = decode_image(bomb, ImageTransform(resize=(8, 8), max_pixels=100_000_000))
    assert image.shape == (8, 8, 3) and not image.any()


def test_the_loader_counts_a_bomb_as_a_bad_sample(tmp_path: Path) -> None:
    samples = {f"k{index}": jpeg(32, 32, seed=index) for index in range(6)}
    samples["bomb"] = declaring(20000, 12000)
    loader = Loader(
        MemoryStorage(samples),
        batch_size=7,
        transform=ImageTransform(resize=(8, 8)),
        failure_policy=FailurePolicy(on_error="skip", max_bad_samples=1),
    )
    [batch] = list(loader)
    assert batch.valid.all() and batch.replaced.sum() == 1 and "bomb" not in batch.keys
    [failure] = loader.failures
    assert failure.sample == "bomb" and "over the limit" in failure.error


def test_limits_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="max_pixels"):
        ImageTransform(max_pixels=0)
    with pytest.raises(ValueError, match="max_pixels"):
        ImageTransform(max_pixels=1 << 40)
