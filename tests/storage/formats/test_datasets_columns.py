"""A Hugging Face dataset's other columns, as ``datasets`` writes them: on a ``save_to_disk``
folder and on its Parquet export alike, `Sampling(where=...)` keeps exactly the rows the same
condition picks row by row, a ``ClassLabel`` column is filtered by its class names as well as by
its integers, and ``extra=("text",)`` brings each kept row's text. A filter naming a class the
column does not have is a named error, and ``extra=`` on records stoker reads one field of is
refused when the Loader is made, naming that cause (it said "need tar shards")."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError, StorageError
from stoker.loader import Sampling
from stoker_testbed.data.peer_formats import random_samples, write_tfrecords

datasets = pytest.importorskip("datasets", reason="these tests read what Hugging Face datasets writes: pip install datasets")
Image = pytest.importorskip("PIL.Image")

CLASSES = ["cat", "dog", "bird"]
ROWS = 60


def rows() -> list[dict]:
    return [
        {"label": index % 3 if index % 7 else (index // 7) % 3, "text": f"document {index}", "score": (index * 37 % 100) / 100}
        for index in range(ROWS)
    ]


def png(index: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (index, 255 - index, 0)).save(out, "PNG")
    return out.getvalue()


@pytest.fixture(scope="module", params=["save_to_disk", "parquet"])
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same rows as ``datasets`` writes them: a ``save_to_disk`` folder of three Arrow files,
    or one Parquet file by ``to_parquet``."""
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=CLASSES),
            "text": datasets.Value("string"),
            "score": datasets.Value("float64"),
        }
    )
    table = rows()
    data = datasets.Dataset.from_dict(
        {
            "image": [{"bytes": png(index), "path": None} for index in range(ROWS)],
            **{name: [row[name] for row in table] for name in table[0]},
        },
        features=features,
    )
    folder = tmp_path_factory.mktemp("hf")
    if request.param == "save_to_disk":
        data.save_to_disk(str(folder / "disk"), num_shards=3)
        return folder / "disk"
    data.to_parquet(str(folder / "data.parquet"))
    return folder / "data.parquet"


def kept_texts(path: Path, where: str) -> Counter:
    loader = Loader(path, batch_size=8, sampling=Sampling(where=where, seed=3), extra=("text",))
    texts: Counter = Counter()
    for batch in loader:
        assert batch.extra is not None
        texts.update(members["text"] for members, padding in zip(batch.extra, batch.padding) if not padding)
    return texts


@pytest.mark.parametrize(
    ("where", "condition"),
    [
        ("label in ['dog']", lambda row: CLASSES[row["label"]] == "dog"),
        ("label == 'bird'", lambda row: CLASSES[row["label"]] == "bird"),
        ("label == 1", lambda row: row["label"] == 1),
        ("label not in ['cat', 'bird'] or score >= 0.9", lambda row: CLASSES[row["label"]] == "dog" or row["score"] >= 0.9),
        ("label != 'cat' and 0.2 <= score < 0.6", lambda row: row["label"] != 0 and 0.2 <= row["score"] < 0.6),
        ("text in ['document 4', 'document 50']", lambda row: row["text"] in ("document 4", "document 50")),
    ],
)
def test_a_filter_keeps_exactly_the_rows_the_condition_picks_with_their_text(dataset: Path, where: str, condition: object) -> None:
    expected = Counter(row["text"] for row in rows() if condition(row))  # type: ignore[operator]
    assert expected, "each filter keeps some rows"
    assert kept_texts(dataset, where) == expected


def test_a_name_that_is_not_one_of_the_classes_is_named(dataset: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"'label' has no class 'horse' \(its classes: 'cat', 'dog', 'bird'\)"):
        Loader(dataset, batch_size=8, sampling=Sampling(where="label in ['dog', 'horse']"))


def test_extra_on_records_stoker_reads_one_field_of_names_that_cause(tmp_path: Path) -> None:
    pytest.importorskip("tfrecord")
    write_tfrecords(tmp_path / "tf", random_samples(12), files=1)
    with pytest.raises(
        StorageError, match=r"stoker reads one field of tfrecord records .*extra= reads other columns of Parquet"
    ) as refused:
        Loader(tmp_path / "tf", batch_size=4, extra=("txt",), decode=None)
    assert "tar shards" not in str(refused.value).split(";")[0]


def test_an_extra_column_the_dataset_lacks_is_refused_when_the_loader_is_made(dataset: Path) -> None:
    with pytest.raises(StorageError, match=r"no column 'caption' \(columns: image, label, text, score\)"):
        Loader(dataset, batch_size=8, extra=("caption",))
