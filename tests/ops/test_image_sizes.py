"""Images' sizes from their headers alone, against Pillow's reading of the same files: JPEG
(with its EXIF orientation), PNG and WebP of many sizes; unreadable headers and absurd declared
sizes are reasons, never an allocation or an abort."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from stoker.ops import image_sizes
from stoker_testbed.data.images import encode, photo, with_orientation


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 700), st.integers(1, 700), st.sampled_from(["JPEG", "PNG", "WEBP"]))
def test_sizes_are_pillows_for_every_format(width: int, height: int, kind: str) -> None:
    data = encode(photo(width, height, seed=width + height), kind)
    sizes = image_sizes([data, bytearray(data), memoryview(data)])
    assert sizes.widths.tolist() == [width] * 3 and sizes.heights.tolist() == [height] * 3
    assert sizes.errors == [None] * 3
    assert sizes.widths.dtype == np.int64


def test_a_jpeg_stored_on_its_side_is_sized_upright_as_pillow_turns_it() -> None:
    images = [with_orientation(orientation, width=60, height=40) for orientation in range(1, 9)]
    sizes = image_sizes(images)
    upright = [ImageOps.exif_transpose(Image.open(io.BytesIO(image))).size for image in images]
    assert list(zip(sizes.widths.tolist(), sizes.heights.tolist())) == upright
    assert upright[5] == (40, 60), "orientation 6 (rotated 90 degrees) is tall"


def test_unreadable_and_absurd_headers_are_reasons_for_those_images_alone() -> None:
    good = encode(photo(32, 24), "JPEG")
    huge = bytearray(good)
    marker = huge.index(b"\xff\xc0")
    huge[marker + 5 : marker + 9] = (60000).to_bytes(2, "big") + (60000).to_bytes(2, "big")  # 3.6 G pixels declared
    sizes = image_sizes([b"not an image", bytes(huge), good, b""])
    assert sizes.widths.tolist() == [0, 0, 32, 0] and sizes.heights.tolist() == [0, 0, 24, 0]
    assert sizes.errors[2] is None and all(sizes.errors[slot] for slot in (0, 1, 3))
    assert "over the limit" in str(sizes.errors[1])
    assert image_sizes([bytes(huge)], max_pixels=4_000_000_000).widths.tolist() == [60000], "a raised limit reads it"
