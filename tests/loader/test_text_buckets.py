"""The TokenLoader with buckets by length: every batch holds whole documents of one bucket, one a
row, padded to the shortest bucket that holds them (cut to the longest where none does, and
counted), each row the document's own tokens; equal steps on every rank with no document twice;
an exact resume mid-epoch; what buckets cannot work with refused by name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import ConfigurationError
from stoker.loader import TokenLoader
from stoker.sampling import LengthBuckets
from stoker.storage import TokenFile

BUCKETS = LengthBuckets([32, 64, 128, 256])
PAD = 0


def corpus(folder: Path, count: int = 600, seed: int = 0) -> TokenFile:
    """Documents of 1 to 400 tokens; document i's tokens are all i + 1 (so a row names its
    document)."""
    lengths = np.random.default_rng(seed).integers(1, 401, count)
    tokens = np.concatenate([np.full(length, index + 1, dtype=np.uint16) for index, length in enumerate(lengths)])
    tokens.tofile(folder / "tokens.bin")
    np.save(folder / "tokens.bin.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    return TokenFile(folder / "tokens.bin")


def _document(row: np.ndarray) -> int:
    return int(row[0]) - 1


def test_every_batch_is_one_buckets_rows_each_a_whole_document_padded_to_it(tmp_path: Path) -> None:
    source = corpus(tmp_path)
    loader = TokenLoader(source, context_length=256, batch_size=4, buckets=BUCKETS, seed=1)
    seen: Counter[int] = Counter()
    widths: Counter[int] = Counter()
    for batch in loader:
        width = batch.input_ids.shape[1]
        assert batch.input_ids.shape == (4, width) and width in BUCKETS.lengths
        for row, mask in zip(batch.input_ids, batch.loss_mask):
            index = _document(row)
            length = int(source.lengths[index])
            fitting = [bucket for bucket in BUCKETS.lengths if bucket >= length]
            assert width == (min(fitting) if fitting else max(BUCKETS.lengths)), f"document {index} of {length} tokens"
            kept = min(length, width)
            assert (row[:kept] == index + 1).all() and (row[kept:] == PAD).all()
            assert mask.sum() == kept and mask[:kept].all()
            seen[index] += 1
        assert batch.cu_seqlens[-1] == batch.input_ids.size and batch.real_tokens == int(batch.loss_mask.sum())
        widths[width] += 1
    counts = loader.bucket_counts()
    assert counts is not None and len(widths) == 4 and max(seen.values()) == 1
    assert counts["cut"] == sum(1 for index in seen if source.lengths[index] > 256) > 0
    assert len(seen) + sum(counts["left_over"]) == len(source)


@pytest.mark.parametrize("buckets", [None, BUCKETS], ids=["packed", "buckets"])
def test_stats_count_the_documents_read_and_the_tokens_delivered(tmp_path: Path, buckets: LengthBuckets | None) -> None:
    source = corpus(tmp_path)
    loader = TokenLoader(source, context_length=256, batch_size=4, buckets=buckets, seed=1)
    batches = list(loader)
    stats = loader.stats()
    assert stats.tokens == sum(batch.real_tokens for batch in batches) > 0
    assert stats.documents == (len(source) if buckets is None else sum(len(batch.input_ids) for batch in batches))
    assert stats.seconds > 0 and stats.text_bytes == 0
    assert f"{stats.tokens:,} tokens delivered" in str(stats) and "of text" not in str(stats), "tokenized documents have no text rate"


def test_three_ranks_take_equal_steps_and_together_read_each_document_once(tmp_path: Path) -> None:
    source = corpus(tmp_path)
    steps, seen = [], Counter[int]()
    for rank in range(3):
        loader = TokenLoader(source, context_length=256, batch_size=4, buckets=BUCKETS, seed=2, rank=rank, world_size=3)
        batches = list(loader)
        steps.append(len(batches))
        seen.update(_document(row) for batch in batches for row in batch.input_ids)
    assert len(set(steps)) == 1 and steps[0] > 0, f"steps per rank: {steps}"
    assert max(seen.values()) == 1


def test_a_resume_mid_epoch_gives_the_rest_of_the_batches(tmp_path: Path) -> None:
    source = corpus(tmp_path)
    options = {"context_length": 256, "batch_size": 4, "buckets": LengthBuckets([32, 64, 128, 256], leftovers="carry"), "seed": 3}
    reference = [batch.input_ids.copy() for batch in TokenLoader(source, **options)]  # type: ignore[arg-type]
    first = TokenLoader(source, **options)  # type: ignore[arg-type]
    iterator = iter(first)
    for _ in range(7):
        next(iterator)
    state = first.state_dict()
    resumed = TokenLoader(source, **options)  # type: ignore[arg-type]
    resumed.load_state_dict(state)
    rest = [batch.input_ids.copy() for batch in resumed]
    assert len(rest) == len(reference) - 7
    assert all(np.array_equal(ours, theirs) for ours, theirs in zip(rest, reference[7:]))
    bad = dict(state, taken=5)
    with pytest.raises(ConfigurationError, match="whole number of batches"):
        TokenLoader(source, **options).load_state_dict(bad)  # type: ignore[arg-type]


def test_options_text_buckets_cannot_work_with_are_refused(tmp_path: Path) -> None:
    source = corpus(tmp_path, count=40)
    with pytest.raises(ConfigurationError, match="up to context_length=128"):
        TokenLoader(source, context_length=128, batch_size=4, buckets=BUCKETS)
    with pytest.raises(ConfigurationError, match="whole numbers of tokens"):
        TokenLoader(source, context_length=256, batch_size=4, buckets=LengthBuckets([32.5, 64]))
    with pytest.raises(ConfigurationError, match="leave shuffle=True"):
        TokenLoader(source, context_length=256, batch_size=4, buckets=BUCKETS, shuffle=False)
    (tmp_path / "text.jsonl").write_text('{"text": "a few words"}\n' * 8)
    tokenizers = pytest.importorskip("tokenizers")
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "few": 1, "words": 2, "[UNK]": 3}, unk_token="[UNK]"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    with pytest.raises(ConfigurationError, match=r"tokenize it into a token file first \(stoker.ingest.write_token_file") as refused:
        TokenLoader(tmp_path / "text.jsonl", tokenizer=words, context_length=256, batch_size=2, buckets=BUCKETS)
    assert "stoker ingest" not in str(refused.value), "no such command: the message named one"
