"""A bucket's shape from any image: ``ImageTransform(cover=(h, w))`` resizes the image, keeping its
aspect ratio, to just cover the shape and crops the overhang (centred, as Pillow's
``ImageOps.fit``, or at a seeded random place), so that a batch of one bucket is one array."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from PIL import Image, ImageOps

from stoker.ops import ImageTransform, decode_batch, decode_image
from stoker_testbed.data.images import difference, jpeg, pillow_rgb


@pytest.mark.parametrize(
    ("width", "height", "shape"), [(800, 600, (96, 168)), (600, 800, (168, 96)), (640, 640, (64, 128)), (300, 900, (128, 128))]
)
def test_centred_cover_matches_pillows_fit(width: int, height: int, shape: tuple[int, int]) -> None:
    data = jpeg(width, height, seed=width + height, quality=95)
    ours = decode_image(data, ImageTransform(cover=shape, dct_scaling=False))
    reference = np.asarray(ImageOps.fit(pillow_rgb(data), (shape[1], shape[0]), Image.BILINEAR, centering=(0.5, 0.5)))
    assert ours.shape == (*shape, 3)
    mean, _ = difference(ours, reference)
    assert mean < 3.0, f"mean difference {mean} from Pillow's fit"


def test_a_random_cover_is_seeded_and_moves_along_the_overhang() -> None:
    data = jpeg(900, 300, seed=3)
    transform = ImageTransform(cover=(64, 64), cover_crop="random")
    first, again, other = (decode_image(data, transform, seed=seed) for seed in (1, 1, 2))
    assert (first == again).all() and not (first == other).all()
    centred = decode_image(data, ImageTransform(cover=(64, 64)))
    assert centred.shape == first.shape == (64, 64, 3)


def test_a_batch_of_every_aspect_ratio_fills_one_buckets_array() -> None:
    images = [jpeg(width, height, seed=width) for width, height in [(400, 300), (300, 400), (500, 100), (256, 256)]]
    batch = decode_batch(images, ImageTransform(cover=(48, 80), layout="CHW"))
    assert batch.images.shape == (4, 3, 48, 80) and batch.valid.all()


def test_cover_survives_pickling_and_refuses_what_cannot_combine() -> None:
    transform = ImageTransform(cover=(64, 96), cover_crop="random", flip_probability=0.5)
    copy = pickle.loads(pickle.dumps(transform))
    assert copy.output_size == (64, 96) and repr(copy) == repr(transform)
    with pytest.raises(ValueError, match="exclusive"):
        ImageTransform(cover=(64, 64), center_crop=32)
    with pytest.raises(ValueError, match="cover resizes itself"):
        ImageTransform(cover=(64, 64), resize_shorter=80)
    with pytest.raises(ValueError, match="cover_crop"):
        ImageTransform(cover=(64, 64), cover_crop="top")
