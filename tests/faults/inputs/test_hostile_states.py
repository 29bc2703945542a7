"""Hostile and damaged states are refused by name, before anything is built from them, and the
loader that refused one goes on as before: for the Sampler, the Loader and the TokenLoader. A
span past the epoch, reversed or negative (which once made positions 0-2 delivered twice), a seed
that is text, a negative epoch, a billion spans: each a ValueError naming the part."""

from __future__ import annotations

import copy
import json
import resource
from pathlib import Path
from typing import Any

import pytest

from stoker import Loader
from stoker.loader import TokenLoader
from stoker.ops import Tokenizer
from stoker.sampling import Sampler
from stoker_testbed.data.synthetic import SyntheticStorage, free_decode
from stoker_testbed.data.text import EOS, make_corpus, write_lines

SAMPLES = 1000


def sampler_state() -> dict[str, Any]:
    sampler = Sampler(SAMPLES, seed=4)
    part = sampler.plan_arrays().part(0, 100)
    sampler.mark_delivered(part.positions, part.padding)
    return sampler.state_dict()


def changed(state: dict[str, Any], **parts: Any) -> dict[str, Any]:
    copied = copy.deepcopy(state)
    for name, value in parts.items():
        if value is _MISSING:
            copied.pop(name)
        else:
            copied[name] = value
    return copied


_MISSING = object()
HOSTILE: list[tuple[str, dict[str, Any], str]] = [
    ("negative span", {"delivered": [[-5, 3]]}, r"'delivered\[0\]' must be a span with 0 <= start"),
    ("reversed span", {"delivered": [[50, 10]]}, r"'delivered\[0\]' must be a span"),
    ("span past the epoch", {"delivered": [[0, SAMPLES + 1]]}, r"end <= 1,000"),
    ("absurd span", {"delivered": [[0, 10**10]]}, r"end <= 1,000"),
    ("overlapping spans", {"delivered": [[0, 10], [5, 20]]}, r"'delivered\[1\]'"),
    ("float span", {"delivered": [[0.5, 3]]}, r"spans of whole numbers"),
    ("text span", {"delivered": [["a", "b"]]}, r"spans of whole numbers"),
    ("a span of three", {"delivered": [[1, 2, 3]]}, r"spans of whole numbers"),
    ("not a list", {"delivered": "0-100"}, r"a list of \[start, end\] spans"),
    ("a huge integer", {"delivered": [[0, 2**80]]}, r"spans of whole numbers"),
    ("text seed", {"seed": "abc"}, r"'seed' must be a whole number"),
    ("negative seed", {"seed": -1}, r"'seed' must be a whole number"),
    ("negative epoch", {"epoch": -3}, r"'epoch' must be a whole number"),
    ("float epoch", {"epoch": 1.5}, r"'epoch' must be a whole number"),
    ("rank outside the world", {"rank": 5}, r"'rank' must be a rank of the world of 1"),
    ("zero world", {"world_size": 0}, r"'world_size' must be a whole number"),
    ("missing delivered", {"delivered": _MISSING}, r"no 'delivered'"),
    ("unknown scheme", {"scheme": "chaos"}, r"'scheme' must be"),
    ("text shuffle", {"shuffle": "yes"}, r"'shuffle' must be true or false"),
    ("negative padding", {"padding_delivered": -1}, r"'padding_delivered' must be"),
    ("an old version", {"version": 1}, r"version 1 was saved by an earlier stoker"),
    ("an unknown version", {"version": 99}, r"'version' must be 2"),
]


@pytest.mark.parametrize("name, parts, message", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_a_hostile_sampler_state_is_refused_by_name_and_changes_nothing(name: str, parts: dict[str, Any], message: str) -> None:
    sampler = Sampler(SAMPLES, seed=4)
    before = sampler.state_dict()
    with pytest.raises(ValueError, match=message):
        sampler.load_state_dict(changed(sampler_state(), **parts))
    assert sampler.state_dict() == before


@pytest.mark.parametrize("state", [None, "x", 5, [], [None], {}, {"version": 2}])
def test_what_is_not_a_sampler_state_is_refused(state: Any) -> None:
    with pytest.raises(ValueError, match="state"):
        Sampler(SAMPLES).load_state_dict(state)


def test_a_state_of_millions_of_spans_is_refused_before_it_is_read() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    spans = [[2 * index, 2 * index + 1] for index in range(5_000_000)]
    with pytest.raises(ValueError, match="at most 4,194,304 spans"):
        Sampler(10**8).load_state_dict(changed(sampler_state(), num_samples=10**8, delivered=spans))
    del spans
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 2_000_000, "KB: nothing built from the spans"


def loader_state() -> dict[str, Any]:
    loader = Loader(SyntheticStorage(SAMPLES), batch_size=10, decode=free_decode)
    for number, _ in enumerate(loader):
        if number == 3:
            break
    state = loader.state_dict()
    loader.close()
    return state


@pytest.mark.parametrize("name, parts, message", HOSTILE[:8], ids=[case[0] for case in HOSTILE[:8]])
def test_a_loader_refuses_a_hostile_state_and_goes_on_as_before(name: str, parts: dict[str, Any], message: str) -> None:
    state = loader_state()
    state["sampler"] = changed(state["sampler"], **parts)
    loader = Loader(SyntheticStorage(SAMPLES), batch_size=10, decode=free_decode)
    with pytest.raises(ValueError, match=message):
        loader.load_state_dict(state)
    assert sum(len(batch.keys) for batch in loader) == SAMPLES, "the refused state changed nothing"
    loader.close()


@pytest.mark.parametrize("state", [None, "x", {"version": 1}, {"version": 1, "sampler": "x"}, {"version": 1, "sampler": None}])
def test_what_is_not_a_loader_state_is_refused_by_name(state: Any) -> None:
    loader = Loader(SyntheticStorage(SAMPLES), batch_size=10, decode=free_decode)
    with pytest.raises(ValueError, match="state"):
        loader.load_state_dict(state)
    loader.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("corpus")
    _, tokenizer = make_corpus(folder / "text", documents=60, files=1)
    return folder / "text", tokenizer


def token_loader(corpus: tuple[Path, Path]) -> TokenLoader:
    return TokenLoader(corpus[0], tokenizer=Tokenizer(corpus[1], eos=EOS), context_length=32, batch_size=2, seed=1)


TOKEN_CASES: list[tuple[str, Any, str]] = [
    ("none", None, "not a TokenLoader state"),
    ("text", "x", "not a TokenLoader state"),
    ("no version", {"version": _MISSING}, "version None is not 1"),
    ("sampler of text", {"sampler": "x"}, "'sampler' must be a dict"),
    ("packer missing", {"packer": _MISSING}, "'packer' must be a dict"),
    ("documents of text", {"documents": "x"}, "'documents' must be a dict"),
    ("negative span", {"sampler": {"delivered": [[-5, 3]]}}, r"'delivered\[0\]' must be a span"),
    ("text seed", {"sampler": {"seed": "abc"}}, "'seed' must be a whole number"),
    ("negative epoch", {"sampler": {"epoch": -3}}, "'epoch' must be a whole number"),
    ("documents consumed past the plan", {"packer": {"documents_consumed": 10**9}}, "documents_consumed is not valid"),
    ("a piece of a document not consumed", {"packer": {"packer": {"pending": [[10**6, 0, 1]]}}}, "piece"),
    ("a piece of text", {"packer": {"packer": {"pending": [["a", 0, 1]]}}}, "piece"),
    ("rows of text", {"packer": {"packer": {"ready": "x"}}}, "packer rows"),
]


def _apply(state: dict[str, Any], change: Any) -> Any:
    if not isinstance(change, dict):
        return change
    result = copy.deepcopy(state)
    for name, value in change.items():
        if value is _MISSING:
            result.pop(name)
        elif isinstance(value, dict) and isinstance(result.get(name), dict):
            result[name] = _apply(result[name], value)
        else:
            result[name] = value
    return result


@pytest.mark.parametrize("name, change, message", TOKEN_CASES, ids=[case[0] for case in TOKEN_CASES])
def test_a_token_loader_refuses_a_hostile_state_by_name(corpus: tuple[Path, Path], name: str, change: Any, message: str) -> None:
    pytest.importorskip("tokenizers")
    saved = token_loader(corpus)
    batches = iter(saved)
    next(batches)
    state = saved.state_dict()
    loader = token_loader(corpus)
    with pytest.raises(ValueError, match=message):
        loader.load_state_dict(_apply(state, change))
    assert sum(1 for _ in loader) == sum(1 for _ in token_loader(corpus)), "the refused state changed nothing"


def test_a_token_loader_refuses_a_state_over_other_text_with_the_same_lines(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    lines = [json.dumps({"text": f"document {number} says this"}) for number in range(30)]
    path = write_lines(tmp_path / "corpus.jsonl", lines)
    first = TokenLoader(path, tokenizer=Tokenizer(corpus[1], eos=EOS), context_length=32, batch_size=2)
    next(iter(first))
    state = first.state_dict()
    write_lines(path, [line.replace("says", "SAYS") for line in lines])  # as many lines, other text
    again = TokenLoader(path, tokenizer=Tokenizer(corpus[1], eos=EOS), context_length=32, batch_size=2)
    with pytest.raises(ValueError, match="saved over other documents .*content"):
        again.load_state_dict(state)
