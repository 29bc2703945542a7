"""Batches: one buffer, per-sample errors under each policy, bad `out` buffers, threads, memory."""

from __future__ import annotations

import threading

import numpy as np
import psutil
import pytest

from stoker.ops import (
    BatchDecodeError,
    ImageDecodeError,
    ImageTransform,
    allocate_batch,
    decode_batch,
    decode_image,
    sample_seeds,
)
from stoker_testbed.data.images import encode, jpeg, photo

TRANSFORM = ImageTransform(resize_shorter=80, center_crop=(64, 64), flip_probability=0.5)


@pytest.fixture(scope="module")
def images() -> list[bytes]:
    return [jpeg(160 + 10 * index, 120, seed=index) for index in range(8)]


def _bad_inputs(good: bytes) -> dict[str, bytes]:
    return {
        "truncated": good[: len(good) // 3],
        "zero bytes": b"",
        "not an image": b"%PDF-1.7 definitely not a picture",
        "corrupt": good[:600] + bytes(range(256)) * 8,
        "header only": good[:2] + b"\xff\xd9",
        "truncated png": encode(photo(40, 30), "PNG")[:300],
    }


def test_batch_equals_single_calls_with_the_same_seeds(images: list[bytes]) -> None:
    seeds = sample_seeds(7, len(images))
    batch = decode_batch(images, TRANSFORM, seed=7)
    assert batch.images.shape == (8, 64, 64, 3) and batch.valid.all() and not batch.failures
    for index, data in enumerate(images):
        assert np.array_equal(batch.images[index], decode_image(data, TRANSFORM, seed=seeds[index]))


def test_bad_samples_are_reported_by_name_and_the_rest_decode(images: list[bytes]) -> None:
    bad = _bad_inputs(images[0])
    items = [images[1], *bad.values(), images[2]]
    names = ["good-1", *bad.keys(), "good-2"]
    with pytest.raises(BatchDecodeError) as caught:
        decode_batch(items, TRANSFORM, names=names)
    error = caught.value
    assert [failure.sample for failure in error.failures] == list(bad.keys())
    assert "truncated" in str(error) and "not a JPEG, PNG or WebP" in str(error) and "empty input" in str(error)
    assert error.batch.valid.tolist() == [True] + [False] * len(bad) + [True]

    zero = decode_batch(items, TRANSFORM, names=names, on_error="zero", seed=3)
    assert zero.images.shape[0] == len(items)
    assert not zero.images[1 : 1 + len(bad)].any(), "failed slots are zero-filled"
    seeds = sample_seeds(3, len(items))
    assert np.array_equal(zero.images[-1], decode_image(images[2], TRANSFORM, seed=seeds[-1]))

    skip = decode_batch(items, TRANSFORM, names=names, on_error="skip", seed=3)
    assert skip.images.shape[0] == 2
    assert np.array_equal(skip.images[0], zero.images[0]) and np.array_equal(skip.images[1], zero.images[-1])


def test_single_image_errors_name_the_image(images: list[bytes]) -> None:
    for _label, data in _bad_inputs(images[0]).items():
        with pytest.raises(ImageDecodeError, match="'sample-42'"):
            decode_image(data, name="sample-42")


def test_caller_buffer_is_filled_in_place(images: list[bytes]) -> None:
    out = allocate_batch(TRANSFORM, 10)
    batch = decode_batch(images, TRANSFORM, out=out)
    assert np.shares_memory(batch.images, out)
    assert out[:8].any() and not out[8:].any()


@pytest.mark.parametrize(
    "make_out, error, message",
    [
        (lambda: np.zeros((8, 64, 64, 3), np.float32), TypeError, "dtype"),
        (lambda: np.zeros((8, 64, 63, 3), np.uint8), ValueError, "shape"),
        (lambda: np.zeros((4, 64, 64, 3), np.uint8), ValueError, "shape"),
        (lambda: np.zeros((8, 64, 64, 3, 1), np.uint8), ValueError, "shape"),
        (lambda: np.zeros((8, 64, 128, 3), np.uint8)[:, :, ::2], ValueError, "contiguous"),
        (lambda: np.zeros((8, 64, 64, 3), np.uint8).transpose(0, 2, 1, 3), ValueError, "contiguous"),
        (lambda: _read_only(np.zeros((8, 64, 64, 3), np.uint8)), ValueError, "read-only"),
        (lambda: [0] * 10, TypeError, "numpy array"),
    ],
)
def test_wrong_out_buffers_are_refused(images: list[bytes], make_out, error, message) -> None:
    with pytest.raises(error, match=message):
        decode_batch(images, TRANSFORM, out=make_out())


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def test_a_batch_needs_a_fixed_output_size(images: list[bytes]) -> None:
    with pytest.raises(ValueError, match="output size"):
        decode_batch(images, ImageTransform(resize_shorter=64))


@pytest.mark.parametrize(
    "arguments",
    [
        {"resize_shorter": 10, "resize": (3, 3)},
        {"center_crop": (3, 3), "random_resized_crop": (3, 3)},
        {"random_resized_crop": (3, 3), "scale": (0.9, 0.1)},
        {"flip_probability": 2.0},
        {"layout": "WHC"},
        {"dtype": "int64"},
        {"dtype": "float32", "std": [0.0, 1.0, 1.0]},
        {"mean": [0.5]},
        {"dtype": "float32", "mean": [0.1, 0.2]},
    ],
)
def test_bad_transforms_are_refused(arguments: dict) -> None:
    with pytest.raises(ValueError):
        ImageTransform(**arguments)


def test_internal_threads_give_the_same_batch(images: list[bytes]) -> None:
    one = decode_batch(images * 3, TRANSFORM, seed=5, threads=1).images
    two = decode_batch(images * 3, TRANSFORM, seed=5, threads=2).images
    four = decode_batch(images * 3, TRANSFORM, seed=5, threads=4).images
    assert np.array_equal(one, two) and np.array_equal(one, four)


def test_many_python_threads_decoding_at_once_agree(images: list[bytes]) -> None:
    expected = [decode_image(data, TRANSFORM, seed=index) for index, data in enumerate(images)]
    mismatches: list[int] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for _ in range(20):
            for index, data in enumerate(images):
                if not np.array_equal(decode_image(data, TRANSFORM, seed=index), expected[index]):
                    mismatches.append(index)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert mismatches == []


def test_no_memory_growth_over_10000_calls(images: list[bytes]) -> None:
    small = [jpeg(48, 40, seed=index) for index in range(4)] + [encode(photo(40, 30), "PNG")]
    out = allocate_batch(TRANSFORM, len(small) + 1)
    items = [*small, b"junk"]
    process = psutil.Process()

    def run(calls: int) -> None:
        for call in range(calls):
            decode_batch(items, TRANSFORM, out=out, on_error="zero", seed=call)

    run(200)  # warm-up: thread-local buffers reach their size
    before = process.memory_info().rss
    run(2000)  # 2,000 batches of 6 = 12,000 decodes
    growth = process.memory_info().rss - before
    assert growth < 8 * 1024 * 1024, f"RSS grew by {growth / 1e6:.1f} MB"


def test_inputs_may_be_any_buffer(images: list[bytes]) -> None:
    data = images[0]
    expected = decode_image(data, TRANSFORM)
    assert np.array_equal(decode_image(bytearray(data), TRANSFORM), expected)
    assert np.array_equal(decode_image(memoryview(data), TRANSFORM), expected)
    assert np.array_equal(decode_image(np.frombuffer(data, np.uint8), TRANSFORM), expected)
    with pytest.raises(TypeError, match="buffer"):
        decode_image(12345)  # type: ignore[arg-type]


def test_results_are_shared_without_copies(images: list[bytes]) -> None:
    array = decode_batch(images, TRANSFORM).images
    view = np.from_dlpack(array)  # the protocol torch.from_dlpack / jax.dlpack use
    assert np.shares_memory(view, array)
