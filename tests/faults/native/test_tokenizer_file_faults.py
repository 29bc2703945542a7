"""A tokenizer.json is outside input. Its own truncation and padding are turned off (one INFO line
says so): the TokenLoader delivers every token of every document, and no pad id. Sizes it asks for
never take the process down (fixed padding of 10^9, a stride past the length), a normalizer chain
that grows the text past the bound is refused by name before either tokenizer loads it, a regex
that gives up on one document fails that document alone, and a Rust panic of the ``tokenizers``
package is a `NativePanicError`, never a ``PanicException``.

The cases that took the process down (an abort, or gigabytes) run in a child process with its
address space bounded, so a regression fails the test, not the test run.
"""

from __future__ import annotations

import json
import logging
import resource
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stoker.errors import ConfigurationError, NativePanicError, SampleError
from stoker.loader import FailurePolicy, TokenLoader
from stoker.ops import Tokenizer
from stoker_testbed.data.text import EOS, make_corpus, write_lines

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[3]
BACKTRACKING = "(a|aa)+(?=b)|x"  # gives up on 41 a's in both engines (fancy-regex and Oniguruma)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, Path]:
    """(texts, their JSON Lines file, a byte-level BPE tokenizer.json trained on them)."""
    folder = tmp_path_factory.mktemp("tokenizer-faults") / "corpus"
    texts, tokenizer = make_corpus(folder, documents=30, files=1)
    return texts, folder / "part-000.jsonl", tokenizer


def changed(tokenizer: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of ``tokenizer`` at ``target`` with ``change`` made to its JSON."""
    document = json.loads(tokenizer.read_text())
    change(document)
    target.write_text(json.dumps(document))
    return target


def packed_tokens(corpus_file: Path, tokenizer: Any, **options: Any) -> tuple[int, TokenLoader]:
    loader = TokenLoader(corpus_file, tokenizer=tokenizer, context_length=64, batch_size=2, shuffle=False, **options)
    return sum(batch.real_tokens for batch in loader), loader


def truncated(document: dict[str, Any]) -> None:
    document["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}


def padded(document: dict[str, Any]) -> None:
    document["padding"] = {
        "strategy": "BatchLongest",
        "direction": "Right",
        "pad_to_multiple_of": None,
        "pad_id": 0,
        "pad_type_id": 0,
        "pad_token": EOS,
    }


SETTINGS = {"truncation": truncated, "padding": padded}


@pytest.mark.parametrize("settings", [["truncation"], ["padding"], ["truncation", "padding"]], ids="+".join)
def test_the_files_truncation_and_padding_are_turned_off_with_one_info_line(
    corpus: tuple[list[str], Path, Path], settings: list[str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    texts, corpus_file, plain = corpus
    expected, _ = packed_tokens(corpus_file, plain)
    assert expected == len(Tokenizer(plain).encode(texts)[0])  # every token of every document

    def change(document: dict[str, Any]) -> None:
        for setting in settings:
            SETTINGS[setting](document)

    path = changed(plain, tmp_path / "tokenizer.json", change)
    with caplog.at_level(logging.INFO, logger="stoker.text"):
        delivered, _ = packed_tokens(corpus_file, path)
    assert delivered == expected  # before: 8 tokens a document, or pad ids counted as tokens
    said = [record.getMessage() for record in caplog.records if "turned off" in record.getMessage()]
    assert len(said) == 1 and str(path) in said[0], said
    assert [setting for setting in SETTINGS if f"its {setting}" in said[0] or f"and {setting}" in said[0]] == settings, said[0]


def test_a_callers_tokenizer_object_is_left_as_it_was(corpus: tuple[list[str], Path, Path]) -> None:
    texts, _, plain = corpus
    package = tokenizers.Tokenizer.from_file(str(plain))
    package.enable_truncation(8)
    ids, lengths = Tokenizer(package).encode(texts[:3])
    assert lengths.tolist() == Tokenizer(plain).encode(texts[:3])[1].tolist()
    assert package.truncation is not None and package.truncation["max_length"] == 8


def _in_a_child(code: str, memory_gb: int = 4) -> subprocess.CompletedProcess[str]:
    """``code`` run in a Python of its own whose address space is bounded to ``memory_gb``: an
    allocation past it fails there (an abort, a MemoryError), never on this machine's memory."""
    limit = memory_gb << 30

    def bound() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, cwd=ROOT, preexec_fn=bound
    )


SIZES = {
    "fixed padding of 10^9": lambda document: document.__setitem__(
        "padding",
        {
            "strategy": {"Fixed": 10**9},
            "direction": "Right",
            "pad_to_multiple_of": None,
            "pad_id": 0,
            "pad_type_id": 0,
            "pad_token": EOS,
        },
    ),
    "padding to a multiple of 2^40": lambda document: document.__setitem__(
        "padding",
        {
            "strategy": "BatchLongest",
            "direction": "Right",
            "pad_to_multiple_of": 2**40,
            "pad_id": 0,
            "pad_type_id": 0,
            "pad_token": EOS,
        },
    ),
    "a stride past max_length": lambda document: document.__setitem__(
        "truncation", {"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 10}
    ),
}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_sizes_the_file_asks_for_never_take_the_process_down(corpus: tuple[list[str], Path, Path], name: str, tmp_path: Path) -> None:
    texts, _, plain = corpus
    path = changed(plain, tmp_path / "tokenizer.json", SIZES[name])
    done = _in_a_child(f"""
        from stoker.ops import Tokenizer
        texts = {texts[:4]!r}
        ids, lengths = Tokenizer({str(path)!r}).encode(texts)
        print(lengths.tolist())
    """)
    assert done.returncode == 0, done.stderr[-3000:]  # before: an abort, a hang, or a PanicException
    assert done.stdout.strip() == str(Tokenizer(plain).encode(texts[:4])[1].tolist())


def test_the_native_core_refuses_those_sizes_itself(corpus: tuple[list[str], Path, Path], tmp_path: Path) -> None:
    from stoker import _native

    _, _, plain = corpus
    for change in SIZES.values():
        text = changed(plain, tmp_path / "tokenizer.json", change).read_text()
        with pytest.raises(ValueError, match="padding to|stride of 10"):
            _native.TextTokenizer(text)


def eight_empty_replaces(document: dict[str, Any]) -> None:
    step = {"type": "Replace", "pattern": {"String": ""}, "content": "ab"}
    document["normalizer"] = {"type": "Sequence", "normalizers": [step] * 8}


def test_a_normalizer_chain_that_grows_the_text_is_refused_by_name(corpus: tuple[list[str], Path, Path], tmp_path: Path) -> None:
    texts, _, plain = corpus
    path = changed(plain, tmp_path / "tokenizer.json", eight_empty_replaces)
    # Before: 50 KB of text grew 3^8 = 6,561 times (several GB, an abort here).
    done = _in_a_child(f"""
        from stoker.errors import ConfigurationError
        from stoker.ops import Tokenizer
        try:
            Tokenizer({str(path)!r}).encode(["words " * 8_000])
        except ConfigurationError as error:
            print("refused:", error)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"refused: {path}: refused as a tokenizer: its normalizers can grow a text 6561 times"), done.stdout
    with pytest.raises(ConfigurationError, match="grow a text 6561 times"):  # a tokenizer object too, before it encodes
        Tokenizer(tokenizers.Tokenizer.from_file(str(path)))


def test_a_token_id_of_a_billion_is_refused_by_name_before_anything_reads_the_vocabulary(
    corpus: tuple[list[str], Path, Path], tmp_path: Path
) -> None:
    # Found by the tokenizer fuzz target: the package writes a vocabulary id by id up to its
    # largest, listing every id it lacks, so its to_str (which the native copy is made from) took
    # 18 s and 4 GB here (an abort in this child), and past a minute under load.
    _, _, plain = corpus
    path = changed(plain, tmp_path / "tokenizer.json", lambda document: document["model"]["vocab"].__setitem__("e", 10**9))
    done = _in_a_child(f"""
        from stoker.errors import ConfigurationError
        from stoker.ops import Tokenizer
        try:
            Tokenizer({str(path)!r})
        except ConfigurationError as error:
            print("refused:", error)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"refused: {path}: refused as a tokenizer: a token id of 1000000000"), done.stdout
    with pytest.raises(ConfigurationError, match="a token id of 1000000000"):  # a loaded object: from its vocabulary
        Tokenizer(tokenizers.Tokenizer.from_file(str(path)))


def with_split(regex: str) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        split = {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}
        document["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, document["pre_tokenizer"]]}

    return change


def corpus_with(tmp_path: Path, texts: list[str], hostile: str, at: int) -> Path:
    lines = [json.dumps({"text": text}) for text in texts]
    lines.insert(at, json.dumps({"text": hostile}))
    return write_lines(tmp_path / "corpus.jsonl", lines)


def test_a_regex_that_gives_up_on_a_document_fails_that_document_alone(corpus: tuple[list[str], Path, Path], tmp_path: Path) -> None:
    texts, _, plain = corpus
    path = changed(plain, tmp_path / "tokenizer.json", with_split(BACKTRACKING))
    corpus_file = corpus_with(tmp_path, texts[:10], "a" * 41, at=4)
    skipping = FailurePolicy(on_error="skip", max_bad_samples=None)
    delivered, loader = packed_tokens(corpus_file, path, failure_policy=skipping)
    assert delivered == len(Tokenizer(path).encode(texts[:10])[0])  # every other document whole
    (failure,) = loader.failures
    assert failure.sample == f"{corpus_file}:5" and failure.stage == "tokenize" and "the tokenizer failed on it" in failure.error
    with pytest.raises(SampleError, match=rf"{corpus_file}:5"):
        packed_tokens(corpus_file, path)


def test_the_reported_regex_on_41_letters_ends_no_run(corpus: tuple[list[str], Path, Path], tmp_path: Path) -> None:
    # (a|aa)+(?=b): Oniguruma (the tokenizers package) gives up and panics; fancy-regex (the
    # native copy) finds that nothing matches. The document is delivered or fails by itself.
    texts, _, plain = corpus
    path = changed(plain, tmp_path / "tokenizer.json", with_split("(a|aa)+(?=b)"))
    corpus_file = corpus_with(tmp_path, texts[:10], "a" * 41, at=0)
    delivered, loader = packed_tokens(corpus_file, path, failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None))
    others = len(Tokenizer(path).encode(texts[:10])[0])
    assert [failure.sample for failure in loader.failures] in ([], [f"{corpus_file}:1"])
    assert delivered == others if loader.failures else delivered > others


class PackageOnly:
    """A tokenizers.Tokenizer whose JSON the native core cannot load: the package does the work."""

    def __init__(self, package: Any) -> None:
        self.package = package

    def __getattr__(self, name: str) -> Any:
        return getattr(self.package, name)

    def to_str(self) -> str:
        return '{"model": 3}'


def test_a_panic_of_the_tokenizers_package_is_a_native_panic_error(corpus: tuple[list[str], Path, Path], tmp_path: Path) -> None:
    _, _, plain = corpus
    package = tokenizers.Tokenizer.from_file(str(changed(plain, tmp_path / "tokenizer.json", with_split("(a|aa)+(?=b)"))))
    tokenizer = Tokenizer(PackageOnly(package))
    assert tokenizer.implementation.startswith("the tokenizers package")
    with pytest.raises(NativePanicError, match="the tokenizers package panicked"):  # before: PanicException, no Exception
        tokenizer.encode(["a" * 41])
    ids, lengths, failed = tokenizer.encode_each(["plain words", "a" * 41, "more words"])
    assert list(failed) == [1] and lengths[1] == 0 and lengths[0] > 0 and lengths[2] > 0
