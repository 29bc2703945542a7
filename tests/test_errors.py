"""One vocabulary of errors: what a user can meet is a `StokerError` of the class that says what
went wrong (bad data, a state that does not match, a wrong argument), and still the built-in it
replaced, so ``except ValueError`` written against earlier versions keeps working."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import ConfigurationError, DecodeError, ProvenanceError, StokerError
from stoker.observe import write_report
from stoker.ops.packing import SequencePacker
from stoker.sampling import Sampler


def _raised(kind: type[Exception], call: object) -> Exception:
    with pytest.raises(kind) as caught:
        call()  # type: ignore[operator]
    assert isinstance(caught.value, StokerError) and isinstance(caught.value, ValueError), type(caught.value).__mro__
    return caught.value


def test_bad_tokens_for_the_packer_are_decode_errors_naming_the_documents() -> None:
    packer = SequencePacker(context_length=8, batch_size=2)
    assert "document 0" in str(_raised(DecodeError, lambda: packer.add(np.zeros((2, 2), np.int64))))
    assert "document 0" in str(_raised(DecodeError, lambda: packer.add(np.array([-3]))))
    assert "negative length" in str(_raised(DecodeError, lambda: packer.add_many(np.arange(4), np.array([-1, 5]))))
    message = str(_raised(DecodeError, lambda: packer.add_many(np.arange(5), np.array([2, 2]))))
    assert "documents 0..1" in message and "add up to 4" in message
    packer.add_many(np.arange(4), np.array([2, 2]))  # nothing was lost on the way: it still packs
    assert packer.documents_consumed == 2


def test_a_packer_state_that_is_not_one_is_a_provenance_error() -> None:
    packer = SequencePacker(context_length=8, batch_size=2)
    _raised(ProvenanceError, lambda: packer.load_state_dict({"version": 1, "pending": "nonsense"}, lambda document: [1, 2]))


def test_a_file_that_is_not_a_bench_run_is_named_as_a_configuration_error(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"format": "something else"}))
    assert str(run) in str(_raised(ConfigurationError, lambda: write_report(run, tmp_path / "out")))
    run.write_text("{not json")
    assert "not a stoker bench run" in str(_raised(ConfigurationError, lambda: write_report(run, tmp_path / "out")))


def test_marking_another_ranks_sample_delivered_is_a_configuration_error_naming_the_position() -> None:
    sampler = Sampler(10, shuffle=False, rank=0, world_size=2)
    mine = [sample.position for sample in sampler.plan()]
    sampler.mark_delivered(mine[:2], [False, False])
    other = next(position for position in range(10) if position not in mine)
    message = str(_raised(ConfigurationError, lambda: sampler.mark_delivered([other], [False])))
    assert f"position {other}" in message and "rank 0's of 2" in message
