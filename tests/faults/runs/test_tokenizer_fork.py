"""A process forked after the native tokenizer ran its thread pool (a torch DataLoader's workers
under the fork start method) tokenizes in the child, the same ids, and does not hang: the child
has the pool's bookkeeping but none of its threads."""

from __future__ import annotations

import itertools
import multiprocessing
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")

from stoker.bench import EOS, corpus_documents, train_tokenizer  # noqa: E402
from stoker.ops import Tokenizer  # noqa: E402

TEXTS = list(itertools.islice(corpus_documents(10**9, seed=5, median_words=200), 64))


def _encode_in_child(path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    tokenizer = _PARENT_TOKENIZER[path]
    ids, lengths = tokenizer.encode(TEXTS)
    queue.put((ids.tolist(), lengths.tolist(), tokenizer.implementation))


_PARENT_TOKENIZER: dict[str, Tokenizer] = {}


def test_a_child_forked_after_the_native_pool_ran_tokenizes_the_same(tmp_path: Path) -> None:
    path = str(train_tokenizer(tmp_path / "tokenizer.json", TEXTS, vocabulary=800))
    tokenizer = Tokenizer(path, eos=EOS)
    assert tokenizer.implementation.startswith("the native core's copy")
    expected = tokenizer.encode(TEXTS)  # the pool runs here, in the parent
    tokenizer.encode(TEXTS)
    _PARENT_TOKENIZER[path] = tokenizer
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_encode_in_child, args=(path, queue))
    child.start()
    try:
        ids, lengths, _ = queue.get(timeout=120)
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert (ids, lengths) == (expected[0].tolist(), expected[1].tolist())
    assert tokenizer.encode(TEXTS)[0].tolist() == ids, "the parent keeps its native copy"
