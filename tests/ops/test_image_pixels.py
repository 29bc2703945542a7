"""Pixel agreement with Pillow (torchvision's PIL path) for every decode and transform case.

Tolerances: JPEG decoders may differ by a few levels (IDCT rounding, chroma upsampling), so
JPEG cases allow a mean absolute difference of 1.0 and a maximum of 8 levels; PNG is lossless
and decodes exactly; a resize of exact pixels agrees within 2 levels (fixed-point rounding).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from stoker.ops import ImageTransform, decode_image
from stoker_testbed.data.images import difference, encode, jpeg, photo, pillow_resize_center_crop, pillow_rgb, with_orientation

JPEG_MEAN, JPEG_MAX = 1.0, 8


@pytest.mark.parametrize("options", [{}, {"progressive": True}, {"subsampling": 0}, {"subsampling": 1}])
def test_jpeg_decode_matches_pillow(options: dict) -> None:
    data = jpeg(seed=3, **options)
    mean, maximum = difference(decode_image(data), np.asarray(pillow_rgb(data)))
    assert mean <= JPEG_MEAN and maximum <= JPEG_MAX, (mean, maximum)


def test_grayscale_jpeg_to_rgb_and_gray() -> None:
    data = encode(Image.fromarray(photo(seed=4)).convert("L"), "JPEG", quality=90)
    rgb = decode_image(data)
    assert rgb.shape == (375, 500, 3)
    mean, maximum = difference(rgb, np.asarray(pillow_rgb(data)))
    assert mean <= JPEG_MEAN and maximum <= JPEG_MAX
    gray = decode_image(data, ImageTransform(grayscale=True))
    assert gray.shape == (375, 500, 1)
    mean, maximum = difference(gray[..., 0], np.asarray(Image.open(io.BytesIO(data)).convert("L")))
    assert mean <= JPEG_MEAN and maximum <= JPEG_MAX


def test_color_jpeg_to_gray_matches_pillow_luma() -> None:
    data = jpeg(seed=5)
    gray = decode_image(data, ImageTransform(grayscale=True))[..., 0]
    reference = np.asarray(Image.open(io.BytesIO(data)).convert("L"))
    mean, maximum = difference(gray, reference)
    assert mean <= 1.5 and maximum <= JPEG_MAX, (mean, maximum)


def test_cmyk_jpeg() -> None:
    data = encode(Image.fromarray(photo(seed=6)).convert("CMYK"), "JPEG", quality=95)
    mean, maximum = difference(decode_image(data), np.asarray(pillow_rgb(data)))
    assert mean <= 2.0 and maximum <= 16, (mean, maximum)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientations(orientation: int) -> None:
    data = with_orientation(orientation)
    ours = decode_image(data)
    reference = np.asarray(pillow_rgb(data))
    assert ours.shape == reference.shape  # 5..8 swap width and height
    mean, maximum = difference(ours, reference)
    assert mean <= JPEG_MEAN and maximum <= JPEG_MAX, (orientation, mean, maximum)


@pytest.mark.parametrize(
    "mode, bits",
    [("RGB", 8), ("RGBA", 8), ("L", 8), ("LA", 8), ("P", 8), ("PA", 8), ("1", 1), ("RGB", 16), ("I;16", 16)],
)
def test_png_variants_decode_exactly(mode: str, bits: int) -> None:
    pixels = photo(64, 48, seed=7)
    if mode == "RGB" and bits == 16:
        # Pillow cannot write 16-bit RGB PNG; build one with the png module's raw layout instead.
        data = _png16_rgb(pixels)
        expected = pixels  # high bytes of value * 257
    elif mode == "I;16":
        gray = np.asarray(Image.fromarray(pixels).convert("L")).astype(np.uint16) * 257
        data = encode(Image.fromarray(gray), "PNG")
        expected = np.repeat((gray >> 8).astype(np.uint8)[..., None], 3, axis=2)
    else:
        image = Image.fromarray(pixels)
        if mode in ("P", "PA"):
            image = image.convert("RGBA" if mode == "PA" else "RGB").quantize(64)
            if mode == "PA":
                image.info["transparency"] = 0
        else:
            image = image.convert(mode)
        data = encode(image, "PNG")
        expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    assert np.array_equal(decode_image(data), expected)


@pytest.mark.parametrize("mode, lossless", [("RGB", True), ("RGBA", True), ("RGB", False), ("RGBA", False)])
def test_webp_decodes_exactly_as_pillow_does(mode: str, lossless: bool) -> None:
    image = Image.fromarray(photo(96, 64, seed=8)).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, "WEBP", lossless=lossless, quality=90)
    data = buffer.getvalue()
    reference = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    ours = decode_image(data)
    # The same codec as Pillow (libwebp): exact, alpha dropped as convert("RGB") does.
    assert np.array_equal(ours, reference)
    gray = decode_image(data, ImageTransform(grayscale=True))
    assert gray.shape == (64, 96, 1)


def _png16_rgb(pixels: np.ndarray) -> bytes:
    import struct
    import zlib

    height, width, _ = pixels.shape
    wide = (pixels.astype(">u2") * 257).tobytes()
    rows = b"".join(b"\x00" + wide[row * width * 6 : (row + 1) * width * 6] for row in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_resize_shorter_and_center_crop_match_torchvision_semantics() -> None:
    transform = ImageTransform(resize_shorter=256, center_crop=(224, 224))
    for seed, size in enumerate([(500, 375), (375, 500), (333, 333), (1024, 300)]):
        data = jpeg(*size, seed=seed)
        ours = decode_image(data, transform)
        assert ours.shape == (224, 224, 3)
        mean, maximum = difference(ours, pillow_resize_center_crop(data, 256, 224))
        assert mean <= JPEG_MEAN and maximum <= JPEG_MAX, (size, mean, maximum)


def test_resize_of_exact_pixels_agrees_within_rounding() -> None:
    data = encode(photo(300, 200, seed=9), "PNG")
    ours = decode_image(data, ImageTransform(resize=(77, 123)))
    reference = np.asarray(Image.open(io.BytesIO(data)).convert("RGB").resize((123, 77), Image.BILINEAR))
    mean, maximum = difference(ours, reference)
    assert mean <= 0.5 and maximum <= 2, (mean, maximum)


def test_upscaling_a_tiny_image() -> None:
    data = encode(np.full((1, 1, 3), (10, 200, 30), np.uint8), "PNG")
    out = decode_image(data, ImageTransform(resize_shorter=256, center_crop=(224, 224)))
    assert out.shape == (224, 224, 3)
    assert np.all(out == np.array([10, 200, 30], np.uint8))


def test_large_image_with_and_without_dct_scaling() -> None:
    gradient = np.linspace(0, 255, 8000, dtype=np.float32)[None, :, None] * np.ones((6000, 1, 3), np.float32)
    gradient[..., 1] = np.linspace(255, 0, 6000, dtype=np.float32)[:, None]
    data = encode(gradient.astype(np.uint8), "JPEG", quality=85)
    reference = pillow_resize_center_crop(data, 256, 224)
    exact = decode_image(data, ImageTransform(resize_shorter=256, center_crop=(224, 224), dct_scaling=False))
    mean, maximum = difference(exact, reference)
    assert mean <= JPEG_MEAN and maximum <= JPEG_MAX, (mean, maximum)
    scaled = decode_image(data, ImageTransform(resize_shorter=256, center_crop=(224, 224), dct_scaling=True))
    mean, maximum = difference(scaled, reference)
    assert mean <= JPEG_MEAN and maximum <= JPEG_MAX, (mean, maximum)


@pytest.mark.parametrize("size, shrink", [((1000, 750), 2), ((2048, 1536), 4), ((4096, 3072), 8)])
def test_dct_scaling_stays_within_the_jpeg_tolerance_on_photos(size: tuple[int, int], shrink: int) -> None:
    # Resize(256) from these sizes lets libjpeg-turbo decode at 1/`shrink` scale (the default).
    data = jpeg(*size, seed=shrink)
    ours = decode_image(data, ImageTransform(resize_shorter=256, center_crop=(224, 224)))
    mean, maximum = difference(ours, pillow_resize_center_crop(data, 256, 224))
    assert mean <= JPEG_MEAN and maximum <= JPEG_MAX, (size, mean, maximum)


def test_random_resized_crop_of_the_whole_image_is_a_plain_resize() -> None:
    data = encode(photo(300, 200, seed=10), "PNG")
    transform = ImageTransform(random_resized_crop=(64, 96), scale=(1.0, 1.0), ratio=(1.5, 1.5))
    ours = decode_image(data, transform, seed=123)
    reference = np.asarray(Image.open(io.BytesIO(data)).convert("RGB").resize((96, 64), Image.BILINEAR))
    mean, maximum = difference(ours, reference)
    assert mean <= 0.5 and maximum <= 2, (mean, maximum)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_resized_crop_reads_only_inside_its_box(seed: int) -> None:
    # torchvision's resized_crop cuts the box out, then resizes it: the filter never reaches the
    # pixels around the box. A 97x77 box in a 100x80 photo has 16 possible places; ours must
    # match Pillow's crop-then-resize at one of them, border pixels included.
    image = photo(100, 80, seed=20 + seed)
    data = encode(image, "PNG")
    transform = ImageTransform(random_resized_crop=(40, 50), scale=(7469 / 8000, 7469 / 8000), ratio=(97 / 77, 97 / 77))
    ours = decode_image(data, transform, seed=seed)
    source = Image.fromarray(image)
    best = min(
        (
            difference(ours, np.asarray(source.crop((left, top, left + 97, top + 77)).resize((50, 40), Image.BILINEAR)))
            for left in range(4)
            for top in range(4)
        ),
        key=lambda result: result[1],
    )
    assert best[0] <= 1 and best[1] <= 2, best


def test_random_resized_crop_is_seeded() -> None:
    data = jpeg(seed=11)
    transform = ImageTransform(random_resized_crop=(224, 224), flip_probability=0.5)
    first = decode_image(data, transform, seed=1)
    assert np.array_equal(first, decode_image(data, transform, seed=1))
    assert not np.array_equal(first, decode_image(data, transform, seed=2))


def test_flip_mirrors_the_output() -> None:
    data = jpeg(seed=12)
    plain = decode_image(data, ImageTransform(resize_shorter=128, center_crop=(100, 120)))
    flipped = decode_image(data, ImageTransform(resize_shorter=128, center_crop=(100, 120), flip_probability=1.0))
    assert np.array_equal(flipped, plain[:, ::-1])


def test_center_crop_larger_than_the_image_pads_with_zeros() -> None:
    data = encode(np.full((4, 6, 3), 77, np.uint8), "PNG")
    out = decode_image(data, ImageTransform(center_crop=(8, 10)))
    assert out.shape == (8, 10, 3)
    assert np.all(out[2:6, 2:8] == 77)
    assert out.sum() == 77 * 4 * 6 * 3


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-6), ("float16", 2e-3)])
def test_float_chw_normalization(dtype: str, tolerance: float) -> None:
    data = jpeg(seed=13)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    base = decode_image(data, ImageTransform(resize_shorter=64, center_crop=(56, 56), flip_probability=1.0))
    out = decode_image(
        data,
        ImageTransform(resize_shorter=64, center_crop=(56, 56), flip_probability=1.0, layout="CHW", dtype=dtype, mean=mean, std=std),
    )
    assert out.shape == (3, 56, 56) and out.dtype == np.dtype(dtype)
    expected = (base.transpose(2, 0, 1) / 255.0 - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    assert np.allclose(out.astype(np.float64), expected, atol=tolerance * max(1.0, np.abs(expected).max()))


def test_uint8_chw_layout() -> None:
    data = jpeg(seed=14)
    hwc = decode_image(data, ImageTransform(resize=(30, 40)))
    chw = decode_image(data, ImageTransform(resize=(30, 40), layout="CHW"))
    assert np.array_equal(chw, hwc.transpose(2, 0, 1))
