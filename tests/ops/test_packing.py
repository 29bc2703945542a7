"""Sequence packing: no token lost or duplicated, right boundaries, exact resume, bad input."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from stoker.ops import SequencePacker

CONTEXT, BATCH = 64, 4


def documents(count: int, seed: int = 0, longest: int = 150) -> list[np.ndarray]:
    generator = random.Random(seed)
    # Token values encode (document, position) so every token is traceable.
    docs = []
    for number in range(count):
        length = generator.choice([0, 1, 5, 13, 20, 40, 63, 64, 65, longest]) if number % 7 == 0 else generator.randint(1, 40)
        docs.append(np.arange(length, dtype=np.uint32) + number * 1000)
    return docs


def check_batch(batch, context: int = CONTEXT) -> list[tuple[int, int, int]]:
    """Check one batch's arrays against its segments; return its (document, start, length) pieces."""
    rows = batch.input_ids.shape[0]
    assert batch.input_ids.shape == batch.position_ids.shape == batch.segment_ids.shape == batch.loss_mask.shape == (rows, context)
    pieces = []
    fill = np.zeros(rows, dtype=int)
    numbers = np.zeros(rows, dtype=int)
    for row, document, start, length in batch.segments.tolist():
        at = fill[row]
        numbers[row] += 1
        tokens = batch.input_ids[row, at : at + length]
        assert tokens.tolist() == list(range(document * 1000 + start, document * 1000 + start + length))
        assert batch.position_ids[row, at : at + length].tolist() == list(range(length)), "positions restart per document"
        assert (batch.segment_ids[row, at : at + length] == numbers[row]).all()
        assert batch.loss_mask[row, at : at + length].all()
        fill[row] += length
        pieces.append((document, start, length))
    for row in range(rows):
        # Padding only at the end of a row.
        assert not batch.loss_mask[row, fill[row] :].any()
        assert (batch.segment_ids[row, fill[row] :] == 0).all()
    assert batch.real_tokens == int(fill.sum()) == int(batch.loss_mask.sum())
    lengths = np.diff(batch.cu_seqlens)
    assert batch.cu_seqlens[0] == 0 and batch.cu_seqlens[-1] == rows * context and (lengths > 0).all()
    assert batch.max_seqlen == lengths.max()
    return pieces


def covered(pieces: list[tuple[int, int, int]]) -> dict[int, list[int]]:
    tokens: dict[int, list[int]] = {}
    for document, start, length in pieces:
        tokens.setdefault(document, []).extend(range(start, start + length))
    return tokens


@pytest.mark.parametrize("strategy", ["greedy", "best_fit"])
@pytest.mark.parametrize("split_across_rows", [False, True])
def test_every_token_exactly_once_with_right_boundaries(strategy: str, split_across_rows: bool) -> None:
    docs = documents(500)
    packer = SequencePacker(CONTEXT, BATCH, strategy=strategy, window=32, split_across_rows=split_across_rows)
    pieces = [piece for batch in packer.pack(docs) for piece in check_batch(batch)]
    tokens = covered(pieces)
    for number, doc in enumerate(docs):
        assert sorted(tokens.get(number, [])) == list(range(len(doc))), f"document {number}"
    assert packer.report.real_tokens == sum(len(doc) for doc in docs)
    assert packer.report.empty_documents == sum(1 for doc in docs if len(doc) == 0)
    if split_across_rows and strategy == "greedy":
        assert packer.report.per_batch[0] == 1.0


def test_long_document_policies() -> None:
    long_doc = np.arange(150, dtype=np.uint32)
    split = SequencePacker(CONTEXT, BATCH, strategy="greedy")
    pieces = [piece for batch in split.pack([long_doc]) for piece in check_batch(batch)]
    assert sorted(pieces) == [(0, 0, 64), (0, 64, 64), (0, 128, 22)]
    truncate = SequencePacker(CONTEXT, BATCH, long_documents="truncate")
    assert [piece for batch in truncate.pack([long_doc]) for piece in check_batch(batch)] == [(0, 0, 64)]
    assert truncate.report.tokens_dropped == 86
    drop = SequencePacker(CONTEXT, BATCH, long_documents="drop")
    assert list(drop.pack([long_doc])) == [] and drop.report.tokens_dropped == 150


@pytest.mark.parametrize("strategy", ["greedy", "best_fit"])
def test_resume_at_random_points_loses_and_repeats_nothing(strategy: str) -> None:
    docs = documents(400, seed=1)
    reference = SequencePacker(CONTEXT, BATCH, strategy=strategy, window=20)
    expected = [batch.segments.tolist() for batch in reference.pack(docs)]
    for stop in random.Random(2).sample(range(1, 399), 6):
        packer = SequencePacker(CONTEXT, BATCH, strategy=strategy, window=20)
        delivered = []
        for document in docs[:stop]:
            packer.add(document)
            delivered.extend(batch.segments.tolist() for batch in packer.batches())
        state = json.loads(json.dumps(packer.state_dict()))  # plain data survives a checkpoint
        resumed = SequencePacker(CONTEXT, BATCH, strategy=strategy, window=20)
        resumed.load_state_dict(state, fetch=lambda number: docs[number])
        assert resumed.documents_consumed == stop
        delivered.extend(batch.segments.tolist() for batch in resumed.pack(docs[stop:]))
        assert delivered == expected, f"stopped after {stop} documents"
        assert resumed.report.real_tokens == reference.report.real_tokens


def test_restore_refuses_other_settings_and_changed_documents() -> None:
    docs = documents(50)
    packer = SequencePacker(CONTEXT, BATCH, window=100)
    for document in docs:
        packer.add(document)
    state = packer.state_dict()
    with pytest.raises(ValueError, match="other settings"):
        SequencePacker(CONTEXT, BATCH, window=99).load_state_dict(state, fetch=lambda number: docs[number])
    with pytest.raises(ValueError, match="document"):
        SequencePacker(CONTEXT, BATCH, window=100).load_state_dict(state, fetch=lambda number: docs[number][:1])


def test_a_fetch_that_looks_at_the_packer_does_not_deadlock() -> None:
    # The native packer's lock is not held while Python's fetch runs: a fetch may read the
    # packer (progress logging, say) without hanging the restore.
    from stoker._native import TokenPacker

    docs = documents(60, seed=4)
    packer = SequencePacker(CONTEXT, BATCH, window=30)
    for document in docs:
        packer.add(document)
    native_state = packer.state_dict()["packer"]
    restored = TokenPacker(CONTEXT, "best_fit", 30)
    looked = []

    def fetch(document: int, start: int, length: int) -> list[int]:
        looked.append(restored.ready_rows)  # takes the packer's lock
        return list(docs[document][start : start + length])

    restored.restore(native_state, fetch)
    assert looked and restored.ready_rows == packer._packer.ready_rows


def test_same_input_same_rows() -> None:
    order = list(range(300))
    random.Random(7).shuffle(order)
    docs = documents(300)
    runs = []
    for _ in range(2):
        packer = SequencePacker(CONTEXT, BATCH)
        runs.append([batch.input_ids.tolist() for batch in packer.pack(docs[number] for number in order)])
    assert runs[0] == runs[1]


def test_fast_path_matches_one_by_one() -> None:
    docs = documents(200, seed=3)
    one = SequencePacker(CONTEXT, BATCH)
    expected = [batch.input_ids.tolist() for batch in one.pack(docs)]
    many = SequencePacker(CONTEXT, BATCH)
    many.add_many(np.concatenate(docs), np.array([len(doc) for doc in docs]))
    assert [batch.input_ids.tolist() for batch in many.batches(final=True)] == expected


@pytest.mark.parametrize(
    "tokens, error, message",
    [
        (np.array([1, -2, 3]), ValueError, "outside"),
        (np.array([1, 2**32]), ValueError, "outside"),
        (np.array([1.5, 2.0]), TypeError, "integers"),
        (np.zeros((2, 2), dtype=np.int32), ValueError, "1-D"),
    ],
)
def test_bad_tokens_name_the_document(tokens, error, message) -> None:
    packer = SequencePacker(CONTEXT, BATCH)
    packer.add(np.arange(3))
    with pytest.raises(error, match=f"document 1: .*{message}"):
        packer.add(tokens)


def test_negative_length_is_refused() -> None:
    packer = SequencePacker(CONTEXT, BATCH)
    with pytest.raises(ValueError, match="document 1: negative length -2"):
        packer.add_many(np.arange(3), np.array([3, -2, 2]))
    with pytest.raises(ValueError, match="add up"):
        packer.add_many(np.arange(3), np.array([1, 1]))


def test_drop_last_and_efficiency_report() -> None:
    docs = [np.arange(30, dtype=np.uint32) + number * 1000 for number in range(11)]
    kept = SequencePacker(CONTEXT, BATCH, strategy="greedy")
    batches = list(kept.pack(docs))
    assert [batch.input_ids.shape[0] for batch in batches] == [4, 2]
    report = kept.report
    assert report.real_tokens == 330 and report.positions == 6 * CONTEXT
    assert abs(report.efficiency - 330 / (6 * CONTEXT)) < 1e-12
    dropped = SequencePacker(CONTEXT, BATCH, strategy="greedy", drop_last=True)
    assert [batch.input_ids.shape[0] for batch in dropped.pack(docs)] == [4]


def test_the_state_stays_the_same_size_however_many_batches_were_packed() -> None:
    # The report's per-batch efficiencies ride in the state: they are the latest PER_BATCH_KEPT,
    # so a checkpoint after a million batches is no larger than one after a few thousand.
    from stoker.ops.packing import PER_BATCH_KEPT

    sizes = []
    for count in (PER_BATCH_KEPT, 6 * PER_BATCH_KEPT):
        packer = SequencePacker(8, 1, strategy="greedy")
        batches = list(packer.pack(np.arange(1, 8, dtype=np.uint32) for _ in range(count)))
        assert packer.report.batches == len(batches) > PER_BATCH_KEPT / 2
        state = packer.state_dict()
        assert len(state["report"]["per_batch"]) == min(len(batches), PER_BATCH_KEPT)
        sizes.append(len(json.dumps(state)))
        resumed = SequencePacker(8, 1, strategy="greedy")
        resumed.load_state_dict(json.loads(json.dumps(state)), lambda document: np.arange(1, 8, dtype=np.uint32))
        assert list(resumed.report.per_batch) == list(packer.report.per_batch)
        assert resumed.report.batches == packer.report.batches  # the totals count every batch
    assert sizes[1] < sizes[0] * 1.1, sizes
