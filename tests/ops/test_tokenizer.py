"""`stoker.ops.Tokenizer` runs a Hugging Face tokenizer in the native core (the crate the
``tokenizers`` package binds) and gives the package's ids, marks and lengths for any text; where
its copy cannot load the tokenizer or differs, the package is used and the reason kept."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

tokenizers = pytest.importorskip("tokenizers")

from stoker.bench import EOS, corpus_documents, train_tokenizer  # noqa: E402
from stoker.ops import Tokenizer  # noqa: E402

DOCUMENTS = list(itertools.islice(corpus_documents(10**9, seed=3, median_words=80), 300))
SCRIPTS = ["Größe naïve café", "日本語のテキスト", "👍🏽 👨‍👩‍👧", "العربية", "e\u0301", "tab\there\n\nnew", "  spaces  "]


def wordpiece(path: Path) -> Path:
    """A BERT-style tokenizer: its normalizer (lower case, accents stripped, CJK split), WordPiece."""
    from tokenizers import models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=800, special_tokens=["[UNK]", "[CLS]", "[SEP]"], show_progress=False)
    tokenizer.train_from_iterator(DOCUMENTS + SCRIPTS, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]")), ("[SEP]", tokenizer.token_to_id("[SEP]"))]
    )
    tokenizer.save(str(path))
    return path


def unigram(path: Path) -> Path:
    """A SentencePiece-style tokenizer: NFKC, Metaspace, Unigram."""
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    tokenizer = tokenizers.Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=600, special_tokens=["<unk>", "</s>"], unk_token="<unk>", show_progress=False)
    tokenizer.train_from_iterator(DOCUMENTS + SCRIPTS, trainer)
    tokenizer.save(str(path))
    return path


@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tokenizers")
    return {
        "byte-level BPE": train_tokenizer(folder / "bpe.json", DOCUMENTS + SCRIPTS, vocabulary=1000),
        "WordPiece": wordpiece(folder / "wordpiece.json"),
        "Unigram": unigram(folder / "unigram.json"),
    }


def package_ids(path: Path, texts: list[str], *, bos: int | None, eos: int | None, add_special_tokens: bool) -> tuple[list[int], list[int]]:
    """What the tokenizers package gives, with the marks put around each text by hand."""
    package = tokenizers.Tokenizer.from_file(str(path))
    ids: list[int] = []
    lengths: list[int] = []
    for encoding in package.encode_batch(texts, add_special_tokens=add_special_tokens):
        document = ([bos] if bos is not None else []) + encoding.ids + ([eos] if eos is not None else [])
        ids += document
        lengths.append(len(document))
    return ids, lengths


@pytest.mark.parametrize("kind", ["byte-level BPE", "WordPiece", "Unigram"])
@pytest.mark.parametrize("marks", [(None, None, False), (None, 0, False), (1, 2, False), (None, None, True)])
def test_the_native_copy_gives_the_packages_ids_on_a_corpus(
    tokenizer_files: dict[str, Path], kind: str, marks: tuple[int | None, int | None, bool]
) -> None:
    bos, eos, special = marks
    tokenizer = Tokenizer(tokenizer_files[kind], bos=bos, eos=eos, add_special_tokens=special)
    assert tokenizer.implementation.startswith("the native core's copy"), tokenizer.implementation
    texts = DOCUMENTS[:200] + SCRIPTS
    for _ in range(2):  # the first call is also checked against the package; the second is not
        ids, lengths = tokenizer.encode(texts)
        assert ids.dtype == np.uint32 and lengths.dtype == np.int64
        expected_ids, expected_lengths = package_ids(tokenizer_files[kind], texts, bos=bos, eos=eos, add_special_tokens=special)
        assert lengths.tolist() == expected_lengths
        assert ids.tolist() == expected_ids


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(max_size=200), max_size=12))
def test_any_text_tokenizes_as_the_package_tokenizes_it(tokenizer_files: dict[str, Path], texts: list[str]) -> None:
    for kind, path in tokenizer_files.items():
        tokenizer = Tokenizer(path, eos=0)
        ids, lengths = tokenizer.encode(texts)
        expected_ids, expected_lengths = package_ids(path, texts, bos=None, eos=0, add_special_tokens=False)
        assert (ids.tolist(), lengths.tolist()) == (expected_ids, expected_lengths), kind


class StandIn:
    """A tokenizers.Tokenizer as far as stoker looks, whose JSON is another (to make the two
    builds disagree on purpose)."""

    def __init__(self, package: Any, json_text: str) -> None:
        self.package, self.json_text = package, json_text

    def __getattr__(self, name: str) -> Any:
        return getattr(self.package, name)

    def to_str(self) -> str:
        return self.json_text


def test_a_tokenizer_the_native_core_cannot_load_is_run_by_the_package(tokenizer_files: dict[str, Path], caplog: Any) -> None:
    package = tokenizers.Tokenizer.from_file(str(tokenizer_files["byte-level BPE"]))
    tokenizer = Tokenizer(StandIn(package, '{"model": 3}'), eos=EOS)
    assert tokenizer.implementation.startswith("the tokenizers package: the native core cannot load it"), tokenizer.implementation
    assert "not the native core's copy" in caplog.text
    ids, lengths = tokenizer.encode(DOCUMENTS[:5])
    expected = package_ids(
        tokenizer_files["byte-level BPE"], DOCUMENTS[:5], bos=None, eos=package.token_to_id(EOS), add_special_tokens=False
    )
    assert (ids.tolist(), lengths.tolist()) == expected


def test_a_native_copy_that_differs_on_the_probes_is_not_used(tokenizer_files: dict[str, Path]) -> None:
    package = tokenizers.Tokenizer.from_file(str(tokenizer_files["byte-level BPE"]))
    other = tokenizer_files["WordPiece"].read_text()
    tokenizer = Tokenizer(StandIn(package, other))
    assert "its ids differ from the tokenizers package's on" in tokenizer.implementation
    assert tokenizer.encode(["hello"])[0].tolist() == package.encode("hello").ids


def test_a_native_copy_that_differs_on_the_first_call_is_dropped_and_the_call_answered_by_the_package(
    tokenizer_files: dict[str, Path],
) -> None:
    # The copy knows one more special token, a word no probe holds but the corpus does.
    package = tokenizers.Tokenizer.from_file(str(tokenizer_files["byte-level BPE"]))
    described = json.loads(package.to_str())
    described["added_tokens"].append(
        {"id": 999, "content": "zebra", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    )
    tokenizer = Tokenizer(StandIn(package, json.dumps(described)))
    assert tokenizer.implementation.startswith("the native core's copy")
    texts = ["a horse", "a zebra grazes"]
    ids, lengths = tokenizer.encode(texts)
    assert ids.tolist() == [token for encoding in package.encode_batch(texts) for token in encoding.ids]
    assert "differ from the tokenizers package's on the first call's text 1" in tokenizer.implementation
    assert tokenizer.encode(texts)[0].tolist() == ids.tolist(), "the package from then on"


def test_a_pickled_tokenizer_makes_its_native_copy_again(tokenizer_files: dict[str, Path]) -> None:
    import pickle

    tokenizer = Tokenizer(tokenizer_files["Unigram"], eos=1)
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.implementation.startswith("the native core's copy")
    assert [array.tolist() for array in copy.encode(SCRIPTS)] == [array.tolist() for array in tokenizer.encode(SCRIPTS)]
