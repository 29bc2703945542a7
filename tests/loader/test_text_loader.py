"""TokenLoader over raw text: every document's tokens packed once per epoch, in the same batches
whatever the concurrency, resumed exactly mid-document after a kill, ranks with equal documents,
and the same from JSON Lines, Parquet and WebDataset shards."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker.errors import ConfigurationError
from stoker.loader import TokenLoader
from stoker.ops import Tokenizer
from stoker_testbed.data.text import EOS, make_corpus

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, Path]:
    pytest.importorskip("zstandard")  # one file of the corpus is .jsonl.zst; no free-threaded wheel of it
    folder = tmp_path_factory.mktemp("text") / "corpus"
    texts, tokenizer = make_corpus(folder, documents=300, files=3)
    return texts, folder, tokenizer


def tokens_of(tokenizer: Path, texts: list[str]) -> list[np.ndarray]:
    tokens, lengths = Tokenizer(tokenizer, eos=EOS).encode(texts)
    return np.split(tokens, np.cumsum(lengths)[:-1])


def packed_documents(batches: list[Any]) -> dict[int, np.ndarray]:
    """Each document's tokens as the batches carry them (pieces joined in order)."""
    pieces: dict[int, list[tuple[int, np.ndarray]]] = {}
    for batch in batches:
        row_starts: dict[int, int] = {}
        for row, document, start, length in batch.segments.tolist():
            offset = row_starts.get(row, 0)
            pieces.setdefault(document, []).append((start, batch.input_ids[row, offset : offset + length]))
            row_starts[row] = offset + length
    return {document: np.concatenate([piece for _, piece in sorted(parts, key=lambda part: part[0])]) for document, parts in pieces.items()}


def test_every_document_is_packed_once_with_its_own_tokens(corpus: tuple[list[str], Path, Path]) -> None:
    texts, folder, tokenizer = corpus
    loader = TokenLoader(folder, tokenizer=Tokenizer(tokenizer, eos=EOS), context_length=256, batch_size=4, seed=3, read_ahead=32)
    batches = list(loader)
    expected = tokens_of(tokenizer, texts)
    packed = packed_documents(batches)
    plan = loader._plan.indices
    assert sorted(packed) == list(range(len(texts)))  # every document of the plan, once
    for document, tokens in packed.items():
        np.testing.assert_array_equal(tokens, expected[int(plan[document])][: len(tokens)])
    assert sum(len(tokens) for tokens in packed.values()) == sum(len(tokens) for tokens in expected)  # nothing cut off
    stats = loader.stats()
    assert stats.documents == len(texts) and stats.tokens == sum(len(tokens) for tokens in expected)
    assert stats.efficiency > 0.9 and stats.pipeline is not None
    assert {stage.name for stage in stats.pipeline.stages} >= {"read", "tokenize"}


def test_the_batches_do_not_depend_on_concurrency(corpus: tuple[list[str], Path, Path]) -> None:
    _, folder, tokenizer = corpus

    def run(concurrency: int, read_ahead: int) -> list[np.ndarray]:
        loader = TokenLoader(
            folder, tokenizer=tokenizer, context_length=128, batch_size=2, seed=1, tokenize_concurrency=concurrency, read_ahead=read_ahead
        )
        loader.set_epoch(2)
        return [batch.input_ids for batch in loader]

    one, four = run(1, 16), run(4, 16)
    assert len(one) == len(four) and all(np.array_equal(a, b) for a, b in zip(one, four))


def test_ranks_share_the_documents_equally(corpus: tuple[list[str], Path, Path]) -> None:
    texts, folder, tokenizer = corpus
    seen = []
    for rank in range(2):
        loader = TokenLoader(folder, tokenizer=tokenizer, context_length=128, batch_size=2, rank=rank, world_size=2, equal_steps=False)
        list(loader)
        seen.append(set(loader._plan.indices.tolist()))
        assert loader.stats().documents == len(texts) // 2
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == len(texts)


_KILLED_RUN = """
import json, os, signal, sys
import numpy as np
from stoker.loader import TokenLoader
folder, tokenizer, out, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
loader = TokenLoader(folder, tokenizer=tokenizer, context_length=192, batch_size=3, seed=5, read_ahead=16)
loader.set_epoch(1)
for step, batch in enumerate(loader):
    np.save(f"{out}/batch-{step}.npy", batch.input_ids)
    with open(f"{out}/state.json", "w") as file:
        json.dump(loader.state_dict(), file)
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_run_resumes_with_the_same_tokens(corpus: tuple[list[str], Path, Path], tmp_path: Path) -> None:
    _, folder, tokenizer = corpus
    reference = TokenLoader(folder, tokenizer=tokenizer, context_length=192, batch_size=3, seed=5, read_ahead=16)
    reference.set_epoch(1)
    whole = [batch.input_ids for batch in reference]
    kill_at = len(whole) // 2
    run = subprocess.run([sys.executable, "-c", _KILLED_RUN, str(folder), str(tokenizer), str(tmp_path), str(kill_at)], capture_output=True)
    assert run.returncode == -9, run.stderr.decode()
    before = [np.load(tmp_path / f"batch-{step}.npy") for step in range(kill_at + 1)]
    resumed = TokenLoader(folder, tokenizer=tokenizer, context_length=192, batch_size=3, seed=5, read_ahead=16)
    state = json.loads((tmp_path / "state.json").read_text())
    held = state["packer"]["packer"]
    assert any(held[part] for part in ("ready", "open", "pending")), "the kill should leave documents in the packer"
    resumed.load_state_dict(state)
    after = [batch.input_ids for batch in resumed]
    assert len(before) + len(after) == len(whole)
    for ours, theirs in zip(before + after, whole):
        np.testing.assert_array_equal(ours, theirs)


def test_stats_count_each_loaders_own_work_a_resumed_one_from_its_resume(corpus: tuple[list[str], Path, Path]) -> None:
    texts, folder, tokenizer = corpus

    def loader() -> TokenLoader:
        return TokenLoader(folder, tokenizer=Tokenizer(tokenizer, eos=EOS), context_length=128, batch_size=2, seed=4, read_ahead=16)

    first = loader()
    batches = iter(first)
    taken = [next(batches) for _ in range(5)]
    state = first.state_dict()
    batches.close()
    before = first.stats()
    assert before.tokens == sum(batch.real_tokens for batch in taken), "the tokens delivered, not those read ahead"
    assert 0 < before.documents <= len(texts) and before.text_bytes > 0 and before.seconds > 0
    resumed = loader()
    resumed.load_state_dict(state)
    rest = list(resumed)
    after = resumed.stats()
    assert after.tokens == sum(batch.real_tokens for batch in rest) > 0
    assert before.tokens + after.tokens == sum(len(tokens) for tokens in tokens_of(tokenizer, texts))
    # Its own reads: the documents of the packer's unfinished rows (each read once) and the rest.
    assert 0 < after.documents <= len(texts) and after.text_bytes > 0 and after.seconds > 0
    said = str(after)
    assert f"{after.documents:,} documents read, {after.tokens:,} tokens delivered" in said and " 0 B/s" not in said, said


def test_a_state_over_other_text_or_another_tokenizer_is_refused(corpus: tuple[list[str], Path, Path], tmp_path: Path) -> None:
    _, folder, tokenizer = corpus
    loader = TokenLoader(folder, tokenizer=Tokenizer(tokenizer, eos=EOS), context_length=128, batch_size=2)
    next(iter(loader))
    state = loader.state_dict()
    other = TokenLoader(folder, tokenizer=Tokenizer(tokenizer), context_length=128, batch_size=2)
    with pytest.raises(ValueError, match="other documents.*tokenizer"):
        other.load_state_dict(state)


def _write_shards(folder: Path, texts: list[str], member: str) -> None:
    folder.mkdir()
    with tarfile.open(folder / "shard-000.tar", "w") as archive:
        for number, text in enumerate(texts):
            data = (json.dumps({"text": text}) if member == "json" else text).encode()
            info = tarfile.TarInfo(f"doc{number:05d}.{member}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("kind", ["parquet", "txt", "json"])
def test_parquet_and_webdataset_text_give_the_same_documents(corpus: tuple[list[str], Path, Path], tmp_path: Path, kind: str) -> None:
    texts, _, tokenizer = corpus
    texts = texts[:60]
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as parquet

        source = tmp_path / "data.parquet"
        parquet.write_table(pa.table({"text": texts}), source, row_group_size=16)
    else:
        source = tmp_path / "shards"
        _write_shards(source, texts, kind)
    loader = TokenLoader(source, tokenizer=Tokenizer(tokenizer, eos=EOS), context_length=4096, batch_size=1, shuffle=False)
    packed = packed_documents(list(loader))
    expected = tokens_of(tokenizer, texts)
    assert len(packed) == len(texts)
    for document, tokens in packed.items():
        np.testing.assert_array_equal(tokens, expected[int(loader._plan.indices[document])])


def test_options_that_need_raw_text_are_refused(corpus: tuple[list[str], Path, Path]) -> None:
    _, folder, tokenizer = corpus
    with pytest.raises(ConfigurationError, match="needs tokenizer="):
        TokenLoader(folder, context_length=64, batch_size=1)
    with pytest.raises(ConfigurationError, match="not a tokenizer"):
        TokenLoader(folder, tokenizer=object(), context_length=64, batch_size=1)


def test_a_tiktoken_encoding_tokenizes_as_it_does_alone(tmp_path: Path) -> None:
    """A tiktoken encoding built here (byte-level ranks and a few merges: no file to download)."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([byte]): byte for byte in range(256)}
    for number, merged in enumerate((b"th", b"he", b"the", b" t", b" the", b"in", b"ing")):
        ranks[merged] = 256 + number
    pattern = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    encoding = tiktoken.Encoding("stoker-test", pat_str=pattern, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 300})
    texts = ["the thing is the thing", "nothing in the string", "é and ☃ too"]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    tokenizer = Tokenizer(encoding, eos="<|endoftext|>")
    assert tokenizer.describe()["kind"] == "tiktoken" and not tokenizer.parallel_inside
    loader = TokenLoader(tmp_path / "corpus.jsonl", tokenizer=tokenizer, context_length=64, batch_size=1, shuffle=False)
    packed = packed_documents(list(loader))
    for document, tokens in packed.items():
        expected = encoding.encode_ordinary(texts[int(loader._plan.indices[document])]) + [300]
        assert tokens.tolist() == expected
    assert len(packed) == len(texts)
