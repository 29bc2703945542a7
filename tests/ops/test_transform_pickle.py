"""An ImageTransform pickles (to Ray tasks, DataLoader workers) into one that decodes alike."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from stoker.ops import ImageTransform, decode_image
from stoker_testbed.data.images import jpeg


@pytest.mark.parametrize(
    "options",
    [
        {"resize": (24, 32)},
        {"random_resized_crop": (20, 30), "scale": (0.2, 0.9), "ratio": (0.5, 2.0), "flip_probability": 0.5},
        {"resize_shorter": 40, "center_crop": 32, "dtype": "float16", "mean": [0.4, 0.5, 0.6], "std": [0.2, 0.3, 0.4], "layout": "CHW"},
        {
            "resize": (16, 16),
            "grayscale": True,
            "dtype": "float32",
            "mean": [0.5],
            "std": [0.25],
            "dct_scaling": False,
            "max_pixels": 10**6,
        },
    ],
)
def test_a_pickled_transform_is_the_same_transform(options: dict[str, object]) -> None:
    transform = ImageTransform(**options)  # type: ignore[arg-type]
    copy = pickle.loads(pickle.dumps(transform))
    assert repr(copy) == repr(transform)
    image = jpeg(90, 70, seed=3)
    assert np.array_equal(decode_image(image, copy, seed=7), decode_image(image, transform, seed=7))
