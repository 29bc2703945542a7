"""`write_token_file`: tokenized documents as one token file with its offsets, read back by
`TokenFile` document for document; the path from raw text to length buckets that the
TokenLoader's refusal of raw text with buckets points to, run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.ingest import write_token_file
from stoker.loader import TokenLoader
from stoker.sampling import LengthBuckets
from stoker.storage import TokenFile

documents_of_ids = st.lists(st.lists(st.integers(0, 65_535), max_size=40), max_size=30)


@settings(max_examples=40, deadline=None)
@given(documents=documents_of_ids, dtype=st.sampled_from(["uint16", "uint32"]))
def test_a_token_file_holds_every_document_as_written(
    tmp_path_factory: pytest.TempPathFactory, documents: list[list[int]], dtype: str
) -> None:
    path = tmp_path_factory.mktemp("tokens") / "corpus.bin"
    written = write_token_file((np.array(document, dtype=np.int64) for document in documents), path, dtype=dtype)
    assert written == len(documents)
    tokens = TokenFile(path, dtype=dtype)
    assert len(tokens) == len(documents)
    assert tokens.lengths.tolist() == [len(document) for document in documents]
    assert [document.tolist() for document in tokens.documents(range(len(documents)))] == documents
    assert sorted(file.name for file in path.parent.iterdir()) == ["corpus.bin", "corpus.bin.offsets.npy"], "no part file left"


def test_an_id_that_does_not_fit_names_the_document_and_leaves_nothing(tmp_path: Path) -> None:
    documents = [np.array([1, 2, 3]), np.array([4, 70_000]), np.array([5])]
    with pytest.raises(
        ConfigurationError, match=r"document 1: token ids must be integers in 0\.\.65535 for uint16 \(a larger vocabulary: dtype='uint32'\)"
    ):
        write_token_file(documents, tmp_path / "corpus.bin", dtype="uint16")
    with pytest.raises(ConfigurationError, match=r"document 0: token ids are a 1-D array, got shape \(2, 2\)"):
        write_token_file([np.zeros((2, 2), dtype=np.int64)], tmp_path / "corpus.bin")
    with pytest.raises(ConfigurationError, match="dtype must be uint16 or uint32"):
        write_token_file([], tmp_path / "corpus.bin", dtype="int8")
    assert list(tmp_path.iterdir()) == []


def test_raw_text_reaches_length_buckets_through_a_token_file(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from stoker.ops import Tokenizer

    words = [f"w{number}" for number in range(50)]
    vocabulary = {word: number for number, word in enumerate(["[UNK]", *words])}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocabulary, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 120)))) for _ in range(200)]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))

    # The path docs/tokens.md gives: read the lines, tokenize them, write the token file.
    lines = [json.loads(line)["text"] for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    ids, lengths = Tokenizer(backend).encode(lines)
    write_token_file(np.split(ids, np.cumsum(lengths)[:-1]), tmp_path / "corpus.bin")  # uint16, as TokenFile reads

    buckets = LengthBuckets([16, 32, 64, 128])
    loader = TokenLoader(TokenFile(tmp_path / "corpus.bin"), context_length=128, batch_size=4, buckets=buckets, seed=2)
    expected = {tuple(vocabulary[word] for word in text.split()) for text in texts}
    delivered: list[tuple[int, ...]] = []
    for batch in loader:
        assert batch.input_ids.shape[1] in buckets.lengths
        delivered += [tuple(row[mask].tolist()) for row, mask in zip(batch.input_ids, batch.loss_mask)]
    counts = loader.bucket_counts()
    assert counts is not None and counts["cut"] == 0
    assert len(set(delivered)) == len(delivered) and len(delivered) + sum(counts["left_over"]) == len(texts)
    assert set(delivered) <= expected, "every row is a document as the tokenizer gave it"
