"""Bad text: a line that is not JSON, lacks its field, is not UTF-8 or holds a number is a named
bad document (skipped or raised, never silent, nothing else lost); damaged and inflating
compressed files are refused by name before anything large is held; a failing tokenizer or a
file gone mid-run ends the run with its error and no thread left behind."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import SampleError, StorageError, TooManyBadSamplesError
from stoker.loader import FailurePolicy, TokenLoader
from stoker.ops import Tokenizer
from stoker.storage import JsonlStorage
from stoker_testbed.data.text import EOS, make_corpus, write_lines

pytest.importorskip("tokenizers")

BAD_LINES = {
    3: ("not json at all", "not a JSON object"),
    7: (json.dumps({"body": "no text field"}), "no field 'text'"),
    11: (json.dumps({"text": 42}), "is int, not text"),
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, path = make_corpus(tmp_path_factory.mktemp("tokenizer") / "corpus", documents=60, files=1)
    return path


def corpus_with_bad_lines(folder: Path) -> tuple[Path, list[str]]:
    good = [f"document number {n} says something" for n in range(20)]
    lines = [json.dumps({"text": text}) for text in good]
    for line_index, (bad, _) in sorted(BAD_LINES.items()):
        lines.insert(line_index, bad)
    path = write_lines(folder / "corpus.jsonl", lines)
    with open(path, "ab") as file:  # a line that is not UTF-8: the 24th line
        file.write(b'{"text": "caf\xe9"}\n')
    return path, good


def test_bad_documents_are_named_and_skipped_and_nothing_else_is_lost(tmp_path: Path, tokenizer: Path) -> None:
    path, good = corpus_with_bad_lines(tmp_path)
    loader = TokenLoader(
        path,
        tokenizer=Tokenizer(tokenizer, eos=EOS),
        context_length=64,
        batch_size=2,
        failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
    )
    real_tokens = sum(batch.real_tokens for batch in loader)
    expected, _ = Tokenizer(tokenizer, eos=EOS).encode(good)
    assert real_tokens == len(expected)  # every good document packed whole, the bad ones add nothing
    failures = {failure.sample: failure for failure in loader.failures}
    assert len(failures) == 4
    for line_index, (_, reason) in BAD_LINES.items():
        failure = failures[f"{path}:{line_index + 1}"]
        assert reason in failure.error and failure.action.startswith("skipped")
    assert "not UTF-8" in failures[f"{path}:24"].error
    assert loader.stats().bad_documents == {"tokenize: skipped": 4}


def test_raise_names_the_line(tmp_path: Path, tokenizer: Path) -> None:
    path, _ = corpus_with_bad_lines(tmp_path)
    loader = TokenLoader(path, tokenizer=tokenizer, context_length=64, batch_size=2, shuffle=False)
    with pytest.raises(SampleError, match=rf"{path}:4.*not a JSON object"):
        list(loader)


def test_the_budget_of_bad_documents_holds(tmp_path: Path, tokenizer: Path) -> None:
    path, _ = corpus_with_bad_lines(tmp_path)
    loader = TokenLoader(
        path, tokenizer=tokenizer, context_length=64, batch_size=2, failure_policy=FailurePolicy(on_error="skip", max_bad_samples=2)
    )
    with pytest.raises(TooManyBadSamplesError):
        list(loader)


def test_a_truncated_gzip_file_is_refused_by_name(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(json.dumps({"text": "x" * 200}).encode() + b"\n" for _ in range(200)))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(StorageError, match="cut.jsonl.gz: cannot be read"):
        JsonlStorage(path)


def test_a_file_that_inflates_past_the_bound_is_refused_before_it_is_held(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as file:  # 64 MiB of one line: about 64 KiB on disk
        for _ in range(64):
            file.write(b"a" * (1 << 20))
    assert path.stat().st_size < 1 << 20
    with pytest.raises(StorageError, match="bomb.jsonl.gz: decompresses to more than max_block_bytes"):
        JsonlStorage(path, max_block_bytes=8 << 20)


def test_a_tokenizer_that_raises_ends_the_run_with_its_error(tmp_path: Path, tokenizer: Path) -> None:
    path, _ = corpus_with_bad_lines(tmp_path)

    class Exploding(Tokenizer):
        def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
            raise RuntimeError("tokenizer blew up")

    loader = TokenLoader(path, tokenizer=Exploding(tokenizer), context_length=64, batch_size=2)
    with pytest.raises(RuntimeError, match="tokenizer blew up"):
        list(loader)


def test_a_file_removed_mid_run_is_a_named_read_failure(tmp_path: Path, tokenizer: Path) -> None:
    lines = [json.dumps({"text": f"document {n} " * 20}) for n in range(400)]
    write_lines(tmp_path / "a.jsonl", lines)
    write_lines(tmp_path / "b.jsonl", lines)
    loader = TokenLoader(
        tmp_path,
        tokenizer=tokenizer,
        context_length=64,
        batch_size=1,
        shuffle=False,
        read_ahead=8,
        failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
    )
    batches = iter(loader)
    next(batches)
    (tmp_path / "b.jsonl").unlink()
    list(batches)
    assert loader.failures and all(failure.stage == "read" and "b.jsonl" in failure.sample for failure in loader.failures)
    assert len(loader.failures) == 400  # every document of the removed file, and no other


def test_a_damaged_kept_line_index_is_never_trusted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The index kept beside a file is input: a damaged one is indexed again (and said so), and
    # one whose digest holds but whose lines lie outside the file is refused by name before a
    # read is sized from it.
    from stoker.storage.local._jsonl_lines import FileLines, cache_path, read_cached, stamp, write_cache

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"".join(b'{"text": "line %d"}\n' % number for number in range(200)))
    expected = JsonlStorage(corpus).read_indices(range(200))
    kept = cache_path(corpus)
    good = kept.read_bytes()
    for damaged in (b"not an index", good[:-8], good[:8] + (1 << 62).to_bytes(8, "little") + good[16:]):
        kept.write_bytes(damaged)
        with caplog.at_level("WARNING", logger="stoker.storage"):
            assert JsonlStorage(corpus).read_indices(range(200)) == expected
        assert f"indexing {corpus} again" in caplog.text
        caplog.clear()
    header = read_cached(corpus, stamp(corpus))
    assert header is not None, "the damaged index was replaced by a good one"
    lines = header.load()
    hostile = FileLines(lines.starts, lines.lengths + (1 << 40), lines.numbers)
    header.digest = hostile.digest()
    write_cache(corpus, stamp(corpus), header, hostile)
    storage = JsonlStorage(corpus)
    with pytest.raises(StorageError, match=r"corpus\.jsonl: its line index .*corpus\.jsonl\.stoker-lines is damaged .*outside the file"):
        storage.read_indices([3])
