"""Corrupt images in a folder: every policy names the bad samples, counts them, and never feeds
zeros to training as if they were data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.errors import ImageDecodeError, SampleError, TooManyBadSamplesError
from stoker.loader import FailurePolicy, Sampling
from stoker.ops import ImageTransform, decode_image, image_sizes
from stoker.storage import FileStorage
from stoker_testbed.data.images import jpeg

from ..conftest import BAD_FILES, make_images

TRANSFORM = ImageTransform(resize=(16, 16))


def epoch_of(loader: Loader) -> list:
    return list(loader)


def test_raise_names_the_bad_sample(tmp_path: Path) -> None:
    make_images(tmp_path, bad={"c1/truncated.jpg": BAD_FILES["c1/truncated.jpg"]})
    loader = Loader(FileStorage(tmp_path), batch_size=8, transform=TRANSFORM, sampling=Sampling(seed=0))
    with pytest.raises(SampleError, match=r"c1/truncated\.jpg.*decode") as caught:
        epoch_of(loader)
    assert [failure.sample for failure in caught.value.failures] == ["c1/truncated.jpg"]
    assert loader.failure_count == 1 and loader.failures[0].action == "raised"
    # The batch that failed was not delivered: a resume reads its good samples again.
    delivered = loader.sampler.delivered
    assert delivered < 33


def test_skip_replaces_deterministically_and_lists_every_bad_sample(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = make_images(tmp_path, bad=BAD_FILES)
    quarantine = tmp_path.parent / "quarantine.jsonl"

    def run() -> tuple[list[list[str]], list[bool], Loader]:
        loader = Loader(
            FileStorage(tmp_path),
            batch_size=8,
            transform=TRANSFORM,
            sampling=Sampling(seed=4, in_order=True),
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=3, quarantine=quarantine),
        )
        keys, replaced = [], []
        for batch in loader:
            assert batch.valid.all() and len(batch) == min(8, 33 - batch.index * 8)
            keys.append(list(batch.keys))
            replaced.extend(batch.replaced.tolist())
            for key, label in zip(batch.keys, batch.labels.tolist()):
                assert key in good and label == int(key[1])
        return keys, replaced, loader

    with caplog.at_level("WARNING", logger="stoker.loader"):
        first_keys, replaced, loader = run()
    assert sorted(failure.sample for failure in loader.failures) == sorted(BAD_FILES)
    assert all(failure.stage == "decode" and failure.action.startswith("replaced by 'c") for failure in loader.failures)
    assert sum(replaced) == 3
    # One warning for the epoch, not one per sample.
    summaries = [record for record in caplog.records if "bad sample" in record.getMessage()]
    assert len(summaries) == 1 and "3 bad sample(s)" in summaries[0].getMessage()
    stats = loader.stats()
    assert stats is not None and stats.sample_failures == {"decode: replaced": 3}
    # The same seed and epoch pick the same replacements.
    second_keys, _, _ = run()
    assert second_keys == first_keys
    lines = [json.loads(line) for line in quarantine.read_text().splitlines()]
    assert len(lines) == 6 and {line["key"] for line in lines} == set(BAD_FILES)
    assert {"key", "stage", "reason", "epoch", "position", "action"} <= set(lines[0])


def test_skip_resumes_exactly(tmp_path: Path) -> None:
    make_images(tmp_path, bad=BAD_FILES)

    def loader() -> Loader:
        return Loader(
            FileStorage(tmp_path),
            batch_size=4,
            transform=TRANSFORM,
            sampling=Sampling(seed=2),
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
        )

    whole = sorted(position for batch in loader() for position in batch.positions.tolist())
    first = loader()
    seen = []
    for number, batch in enumerate(first):
        seen.extend(batch.positions.tolist())
        if number == 3:
            break
    resumed = loader()
    resumed.load_state_dict(first.state_dict())
    seen.extend(position for batch in resumed for position in batch.positions.tolist())
    assert sorted(seen) == whole == list(range(33))


def test_zero_marks_invalid_and_counts(tmp_path: Path) -> None:
    make_images(tmp_path, bad=BAD_FILES)
    loader = Loader(
        FileStorage(tmp_path), batch_size=8, transform=TRANSFORM, failure_policy=FailurePolicy(on_error="zero", max_bad_samples=3)
    )
    invalid = {}
    for batch in loader:
        for key, valid, image in zip(batch.keys, batch.valid.tolist(), batch.data):
            if not valid:
                invalid[key] = int(image.sum())
    assert invalid == dict.fromkeys(BAD_FILES, 0)
    assert sorted((failure.sample, failure.action) for failure in loader.failures) == sorted((key, "zero-filled") for key in BAD_FILES)


def test_budget_stops_the_epoch_with_the_list(tmp_path: Path) -> None:
    make_images(tmp_path, bad=BAD_FILES)
    loader = Loader(
        FileStorage(tmp_path), batch_size=33, transform=TRANSFORM, failure_policy=FailurePolicy(on_error="skip", max_bad_samples=2)
    )
    with pytest.raises(TooManyBadSamplesError, match="more than max_bad_samples=2") as caught:
        epoch_of(loader)
    assert len(caught.value.failures) == 3
    assert loader.sampler.delivered == 0  # the batch never reached the loop


def test_fraction_budget(tmp_path: Path) -> None:
    make_images(tmp_path, bad=BAD_FILES)
    # 10% of 33 samples: 4 allowed, 3 bad.
    assert (
        len(
            epoch_of(
                Loader(
                    FileStorage(tmp_path),
                    batch_size=8,
                    transform=TRANSFORM,
                    failure_policy=FailurePolicy(on_error="zero", max_bad_samples=0.1),
                )
            )
        )
        == 5
    )
    with pytest.raises(TooManyBadSamplesError):
        epoch_of(
            Loader(
                FileStorage(tmp_path),
                batch_size=8,
                transform=TRANSFORM,
                failure_policy=FailurePolicy(on_error="zero", max_bad_samples=0.05),
            )
        )


def test_unreadable_file_fails_at_fetch_and_names_the_file(tmp_path: Path) -> None:
    make_images(tmp_path)
    storage = FileStorage(tmp_path)
    (tmp_path / "c0/003.jpg").unlink()  # gone after listing
    loader = Loader(storage, batch_size=8, transform=TRANSFORM, failure_policy=FailurePolicy(on_error="zero", max_bad_samples=3))
    assert sum(len(batch) for batch in loader) == 30
    [failure] = loader.failures
    assert failure.sample == "c0/003.jpg" and failure.stage == "fetch" and "c0/003.jpg" in failure.error


def test_user_decode_errors_follow_the_policy(tmp_path: Path) -> None:
    make_images(tmp_path, count=12)

    def decode(data: bytes) -> int:
        if data[-10:] == (tmp_path / "c1/004.jpg").read_bytes()[-10:]:
            raise ValueError("cannot parse this one")
        return len(data)

    loader = Loader(
        FileStorage(tmp_path), batch_size=5, decode=decode, failure_policy=FailurePolicy(on_error="skip"), sampling=Sampling(seed=1)
    )
    values = [value for batch in loader for value in batch.data]
    assert len(values) == 12 and all(isinstance(value, int) for value in values)
    [failure] = loader.failures
    assert failure.sample == "c1/004.jpg" and "cannot parse this one" in failure.error
    with pytest.raises(SampleError, match="cannot parse this one"):
        epoch_of(Loader(FileStorage(tmp_path), batch_size=5, decode=decode))


def test_bad_policy_arguments_are_refused(tmp_path: Path) -> None:
    make_images(tmp_path, count=3)
    with pytest.raises(ValueError, match="on_error"):
        Loader(FileStorage(tmp_path), batch_size=2, failure_policy=FailurePolicy(on_error="ignore"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_bad_samples"):
        Loader(FileStorage(tmp_path), batch_size=2, failure_policy=FailurePolicy(max_bad_samples=-1))


def test_a_quarantine_file_that_cannot_be_written_is_refused_up_front(tmp_path: Path) -> None:
    make_images(tmp_path, count=3)
    with pytest.raises(OSError, match=r"quarantine file .*missing/bad\.jsonl"):
        Loader(FileStorage(tmp_path), batch_size=2, failure_policy=FailurePolicy(quarantine=tmp_path / "missing" / "bad.jsonl"))


def test_skip_with_nothing_readable_to_replace_zero_fills_and_says_so(tmp_path: Path) -> None:
    for index in range(4):  # every sample is bad: no replacement can be found
        (tmp_path / "c0").mkdir(exist_ok=True)
        (tmp_path / "c0" / f"{index}.jpg").write_bytes(b"not an image")
    loader = Loader(
        FileStorage(tmp_path), batch_size=4, transform=TRANSFORM, failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None)
    )
    [batch] = list(loader)
    assert not batch.valid.any() and not batch.replaced.any() and not batch.data.any()
    assert [failure.action for failure in loader.failures] == ["zero-filled (no readable replacement in 16 tries)"] * 4
    stats = loader.stats()
    assert stats is not None and stats.sample_failures == {"decode: zero-filled (no readable replacement in 16 tries)": 4}


def test_a_jpeg_cut_short_but_closed_is_refused_where_pillow_fills_it_with_gray(tmp_path: Path) -> None:
    # The scan ends halfway, then an end-of-image marker: libjpeg warns and fills the rest with
    # gray, and Pillow returns that image. A loader must not train on it.
    good = jpeg(seed=1)
    cut = good[: len(good) // 2] + b"\xff\xd9"
    with pytest.raises(ValueError, match="corrupt JPEG: premature end of data segment"):
        decode_image(cut)
    make_images(tmp_path, bad={"c0/cut.jpg": cut})
    loader = Loader(FileStorage(tmp_path), batch_size=8, transform=TRANSFORM, sampling=Sampling(seed=0))
    with pytest.raises(SampleError, match=r"c0/cut\.jpg.*premature end") as caught:
        epoch_of(loader)
    assert [failure.sample for failure in caught.value.failures] == ["c0/cut.jpg"]


def test_stray_bytes_before_a_marker_lose_no_pixel_and_are_accepted() -> None:
    # Common in real datasets (ImageNet has such files): libjpeg warns, every pixel is intact.
    good = jpeg(seed=2)
    padded = good[:-2] + b"\x00\x00\x00" + good[-2:]
    assert np.array_equal(decode_image(padded), decode_image(good))


def test_a_jpeg_cut_before_its_frame_header_is_an_error_naming_it_not_the_last_images_size() -> None:
    # TurboJPEG answered FF D8 FF (or a file of tables only) as a success, with the size of the
    # image its thread had read before: 32x24, even in a later call.
    good = jpeg(32, 24, seed=5)
    frame = good.index(b"\xff\xc0")
    for bad in (b"\xff\xd8\xff", good[:frame], good[:frame] + b"\xff\xd9", good[: frame + 6]):
        sizes = image_sizes([good, bad])
        assert (sizes.widths.tolist(), sizes.heights.tolist()) == ([32, 0], [24, 0]), len(bad)
        later = image_sizes([bad])
        assert later.widths.tolist() == [0] and later.errors[0] is not None and "no image in the data" in later.errors[0]
        named = image_sizes([good, bad], names=["good.jpg", "cut.jpg"]).errors
        assert named[0] is None and named[1] is not None
        assert named[1].startswith("image 'cut.jpg': corrupt JPEG: no image in the data"), named[1]
        with pytest.raises(ImageDecodeError, match="'cut.jpg'.*no image in the data"):
            decode_image(bad, name="cut.jpg")


def test_a_corrupt_jpeg_does_not_fail_the_good_ones_after_it_on_its_thread() -> None:
    # libjpeg can be left inside a header after garbage; the next image must not inherit that.
    good = jpeg(80, 60, seed=3)
    transform = ImageTransform(resize=(16, 16))
    for bad in (b"\xff\xd8\xff broken", good[: len(good) // 3], b"\xff\xd8\xff\xc0\x00\x11" + b"\x00" * 20):
        with pytest.raises(ValueError, match="JPEG"):
            decode_image(bad, transform)
        assert decode_image(good, transform).shape == (16, 16, 3)
