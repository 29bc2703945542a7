"""A user's journey: an image classification dataset made by Hugging Face ``datasets`` itself (an
``Image``, a ``ClassLabel`` and a ``text`` column), saved with ``save_to_disk`` and exported with
``to_parquet``, each read by the Loader with its defaults, filtered by class name and with the
text beside each image (``extra=("text",)``): a whole epoch delivers exactly the rows the filter
keeps, each once, each image with its own label and text. Before, the ``save_to_disk`` folder
refused the filter ("datasets records carry no columns a filter reads") and ``extra=`` ("need tar
shards"), the class name kept nothing on Parquet, and every Parquet open warned twice; now the
open warns of nothing, and ``stoker inspect`` shows the Parquet notes."""

from __future__ import annotations

import io
import logging
from collections import Counter
from pathlib import Path

import pytest

import stoker
from stoker.ingest import format_report, inspect_storage
from stoker.loader import Sampling

datasets = pytest.importorskip("datasets")
Image = pytest.importorskip("PIL.Image")

CLASSES = ["cat", "dog", "bird", "fish"]
ROWS = 150
WANTED = ["dog", "fish"]


def colour(index: int) -> tuple[int, int, int]:
    return (index % 256, (index * 7) % 256, 200)


def make_dataset(folder: Path) -> tuple[Path, Path, list[dict]]:
    """What a user's script does with ``datasets``: a Dataset from Python lists with its
    features, then ``save_to_disk`` and ``to_parquet`` with their defaults."""
    rows = [{"label": (index * 5) % 4, "text": f"a photo, number {index}"} for index in range(ROWS)]
    images = []
    for index in range(ROWS):
        out = io.BytesIO()
        Image.new("RGB", (16, 12), colour(index)).save(out, "PNG")
        images.append({"bytes": out.getvalue(), "path": None})
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=CLASSES), "text": datasets.Value("string")})
    data = datasets.Dataset.from_dict(
        {"image": images, "label": [row["label"] for row in rows], "text": [row["text"] for row in rows]}, features=features
    )
    data.save_to_disk(str(folder / "saved"))
    data.to_parquet(str(folder / "photos.parquet"))
    return folder / "saved", folder / "photos.parquet", rows


@pytest.mark.parametrize("written_by", ["save_to_disk", "to_parquet"])
def test_a_filter_by_class_name_with_the_text_beside_each_image_reads_a_whole_epoch(
    written_by: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    saved, parquet, rows = make_dataset(tmp_path)
    path = saved if written_by == "save_to_disk" else parquet
    caplog.set_level(logging.INFO, logger="stoker")

    loader = stoker.Loader(path, batch_size=16, sampling=Sampling(where=f"label in {WANTED!r}"), extra=("text",))
    delivered: Counter = Counter()
    for batch in loader:
        assert batch.extra is not None
        for image, label, members, padding in zip(batch.data, batch.labels.tolist(), batch.extra, batch.padding):
            if padding:
                continue
            index = int(members["text"].rsplit(" ", 1)[1])
            assert CLASSES[label] == CLASSES[rows[index]["label"]] in WANTED, members
            assert Image.open(io.BytesIO(image)).getpixel((0, 0)) == colour(index), f"row {index}'s own image (its bytes, as stored)"
            delivered[members["text"]] += 1

    assert delivered == Counter(row["text"] for row in rows if CLASSES[row["label"]] in WANTED), "the kept rows, each once"
    warned = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert warned == [], "a dataset as datasets writes it opens without a warning"

    report = inspect_storage(path)
    assert report["samples"] == ROWS and set(report["labels"]) == set(CLASSES)
    if written_by == "to_parquet":  # what the open no longer warns of, inspect shows
        shown = format_report(report)
        assert "note: " in shown and "not read: text" in shown and "carry no checksums" in shown
