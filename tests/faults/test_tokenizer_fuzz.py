"""The tokenizer target of the fuzz suite: structure-aware mutations of a ``tokenizer.json``
(`fuzz/tokenizer_mutations.py`), each loaded by `stoker.ops.Tokenizer` (both its paths: the
native core's copy and the ``tokenizers`` package it checks against), encoded, and run through a
`TokenLoader` in the suite's child process. A case passes when all of that works, or the file is
refused naming itself, or a document fails by itself (named by the loader); it fails on a
signal or an abort, a ``PanicException``, a hang, or an RSS past the suite's bound.

`test_fuzz.py` mutates the same seed's bytes (its numbers pushed to extremes); here its structure
is: sizes, regexes, normalizer chains, models and post-processors. A failing case is saved under
``fuzz/regressions/tokenizer/``, which `test_fuzz.test_saved_regressions_stay_fixed` runs from
then on. Budget: ``STOKER_FUZZ_EXAMPLES`` cases (default 60).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from .fuzz.seeds import Seed
from .fuzz.tokenizer_mutations import make_seed, tokenizer_mutated
from .test_fuzz import EXAMPLES, FRESH, ROOT, Worker, _case, _save, _verdict

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def worker() -> object:
    started = Worker()
    yield started
    started.close()


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    folder = tmp_path_factory.mktemp("tokenizer-seed") / "tokenizer"
    make_seed(folder)
    return Seed("tokenizer", folder, "tokenizer.json")


def test_mutated_tokenizers_load_and_encode_or_fail_by_name(seed: Seed, worker: Worker, tmp_path: Path) -> None:
    original = (seed.folder / seed.file).read_bytes()
    answer = worker.run("tokenizer", *_case(seed, original, tmp_path / "case"))
    assert answer["outcome"] == "decoded", f"the seed itself fails: {answer}"

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not FRESH, database=None, suppress_health_check=list(HealthCheck))
    @given(data=tokenizer_mutated(original))
    def check(data: bytes) -> None:
        answer = worker.run("tokenizer", *_case(seed, data, tmp_path / "case"))
        reason = _verdict(answer)
        if reason is not None:
            saved = _save("tokenizer", data, reason)
            raise AssertionError(f"tokenizer: {reason} (saved as {saved.relative_to(ROOT)})")

    check()
