"""The Loader's option objects: checked where built, printable, one spelling with the CLI, and the
old keywords still working for one release, each with a warning that names the new spelling."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from stoker.errors import ConfigurationError, StokerError
from stoker.loader import FailurePolicy, Loader, Reads, Sampling, Throughput
from stoker.loader._options import SHUFFLES
from stoker.storage import MemoryStorage


def _storage(count: int = 40) -> MemoryStorage:
    return MemoryStorage(
        {f"k{index:02d}": bytes([index]) for index in range(count)}, labels={f"k{index:02d}": index for index in range(count)}
    )


def _keys(loader: Loader) -> list[list[str]]:
    return [list(batch.keys) for batch in loader]


def test_the_loader_takes_at_most_ten_parameters_besides_the_old_keywords() -> None:
    import inspect

    parameters = [name for name, parameter in inspect.signature(Loader).parameters.items() if parameter.kind is not parameter.VAR_KEYWORD]
    assert len(parameters) <= 10, parameters


@pytest.mark.parametrize(
    "old, new",
    [
        ({"shuffle": False}, {"sampling": Sampling(shuffle="none")}),
        ({"shuffle": True, "seed": 3}, {"sampling": Sampling(shuffle="uniform", seed=3)}),
        ({"seed": 5, "rank": 1, "world_size": 3, "pad": False}, {"sampling": Sampling(seed=5, rank=1, world_size=3, pad=False)}),
        ({"in_order": True, "fetch_concurrency": 2}, {"sampling": Sampling(in_order=True), "reads": Reads(fetch_concurrency=2)}),
        ({"decode_concurrency": 1, "prefetch": 0}, {"throughput": Throughput(decode_concurrency=1, prefetch=0)}),
    ],
)
def test_each_old_keyword_gives_the_same_batches_as_its_new_spelling_and_says_it(old: dict, new: dict) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        before = _keys(Loader(_storage(), batch_size=8, **old))
    messages = " ".join(str(warning.message) for warning in caught)
    for group in new:
        assert f"Loader({group}=stoker." in messages, messages
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns about nothing
        after = _keys(Loader(_storage(), batch_size=8, **new))
    # Batches come out of order (Sampling(in_order=False)): the same batches, in any order.
    assert sorted(before) == sorted(after) and sum(len(batch) for batch in after) > 0


def test_old_failure_keywords_apply_the_same_policy() -> None:
    class Broken(MemoryStorage):
        def _read_indices(self, indices):  # type: ignore[no-untyped-def]
            return [
                ValueError(f"sample {index} is broken") if index == 3 else data
                for index, data in zip(indices, super()._read_indices(indices))
            ]

    storage = Broken({f"k{index}": bytes([index]) for index in range(10)})
    with pytest.warns(DeprecationWarning) as caught:
        old = Loader(storage, batch_size=5, shuffle=False, on_error="zero", max_bad_samples=None)
    messages = [str(warning.message) for warning in caught]
    assert any("failure_policy=stoker.FailurePolicy(on_error='zero', max_bad_samples=None)" in message for message in messages), messages
    assert any("sampling=stoker.Sampling(shuffle='none')" in message for message in messages), messages
    batches = list(old)
    new = Loader(
        storage, batch_size=5, sampling=Sampling(shuffle="none"), failure_policy=FailurePolicy(on_error="zero", max_bad_samples=None)
    )
    # Batches may arrive out of order (in_order=False is the default): compared by number.
    assert [batch.valid.tolist() for batch in sorted(batches, key=lambda batch: batch.index)] == [
        batch.valid.tolist() for batch in sorted(new, key=lambda batch: batch.index)
    ]
    assert [failure.sample for failure in old.failures] == ["k3"] and old.failures[0].action == "zero-filled"


def test_an_old_keyword_beside_its_option_object_is_refused() -> None:
    with pytest.raises(TypeError, match=r"give seed inside sampling=Sampling\(...\), not beside it"):
        Loader(_storage(), batch_size=4, sampling=Sampling(), seed=3)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) 'shufle'"):
        Loader(_storage(), batch_size=4, shufle="none")


def test_option_objects_are_checked_where_built_and_print_as_the_call_that_builds_them() -> None:
    with pytest.raises(ConfigurationError, match='shuffle must be "uniform", "block" or "none"'):
        Sampling(shuffle="random")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match='on_error must be "raise", "skip" or "zero"'):
        FailurePolicy(on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_bad_samples must be a count >= 0 or a fraction below 1.0"):
        FailurePolicy(max_bad_samples=1.5)
    with pytest.raises(ConfigurationError, match='pin_memory must be True, False or "auto"'):
        Throughput(pin_memory="yes")  # type: ignore[arg-type]
    policy = FailurePolicy(on_error="skip", max_bad_samples=10)
    assert repr(policy) == "FailurePolicy(on_error='skip', max_bad_samples=10, quarantine=None, max_failures=0)"
    assert eval(repr(policy), {"FailurePolicy": FailurePolicy}) == policy
    assert isinstance(ConfigurationError("x"), ValueError) and isinstance(ConfigurationError("x"), StokerError)


def test_a_loader_says_which_options_it_runs_with() -> None:
    loader = Loader(_storage(), batch_size=4, sampling=Sampling(seed=7))
    assert loader.options["sampling"] == Sampling(seed=7)
    assert loader.options["failure_policy"] == FailurePolicy() and loader.options["throughput"] == Throughput()


def test_the_python_api_and_the_cli_spell_the_shuffle_alike(capsys: pytest.CaptureFixture[str]) -> None:
    from stoker.cli import main

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert "--shuffle {uniform,block,none}" in capsys.readouterr().out
    assert SHUFFLES == ("uniform", "block", "none")
    for shuffle in ("uniform", "none"):  # "block" needs a storage with blocks
        assert Loader(_storage(), batch_size=4, sampling=Sampling(shuffle=shuffle)).options["sampling"].shuffle == shuffle


def test_the_boolean_shuffle_still_works_inside_sampling_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match='shuffle=False is now shuffle="none"'):
        sampling = Sampling(shuffle=False)  # type: ignore[arg-type]
    assert sampling.shuffle == "none"


def test_moved_names_still_import_with_a_warning_naming_their_new_home() -> None:
    import stoker.loader
    import stoker.ops
    import stoker.storage

    with pytest.warns(DeprecationWarning, match=r"stoker.storage.convert_storage is now stoker.ingest.convert_storage"):
        assert stoker.storage.convert_storage is stoker.ingest.convert_storage  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match=r"stoker.loader.BadSample is now stoker.failures.Failure"):
        assert stoker.loader.BadSample is stoker.failures.Failure  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match=r"stoker.ops.SampleFailure is now stoker.failures.Failure"):
        assert stoker.ops.SampleFailure is stoker.failures.Failure  # type: ignore[attr-defined]
    import stoker.device
    import stoker.observe

    with pytest.warns(DeprecationWarning, match=r"stoker.observe.replay is now stoker.loader.replay"):
        assert stoker.observe.replay is stoker.loader.replay  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match=r"stoker.loader.BufferPool is now stoker.device.BufferPool"):
        assert stoker.loader.BufferPool is stoker.device.BufferPool  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match=r"stoker.loader.pinned_allocator is now stoker.device.pinned_allocator"):
        assert stoker.loader.pinned_allocator is stoker.device.pinned_allocator  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        stoker.storage.nothing_here  # type: ignore[attr-defined]  # noqa: B018


def test_the_failure_policy_keyword_has_one_name_and_the_old_ones_warn() -> None:
    from stoker.loader import TokenLoader

    store = MemoryStorage({f"k{index}": bytes([index]) for index in range(8)})
    policy = FailurePolicy(on_error="skip", max_bad_samples=2)
    with pytest.warns(DeprecationWarning, match=r"Loader\(failures=...\) is now Loader\(failure_policy=...\)"):
        old = Loader(store, batch_size=2, failures=policy)  # type: ignore[call-arg]
    assert old.options["failure_policy"] is policy
    with pytest.raises(TypeError, match="failure_policy= only"):
        Loader(store, batch_size=2, failure_policy=policy, failures=policy)  # type: ignore[call-arg]
    documents = [np.arange(5, dtype=np.uint32)]
    with pytest.warns(DeprecationWarning, match=r"TokenLoader\(failure=...\) is now TokenLoader\(failure_policy=...\)"):
        with pytest.raises(ConfigurationError, match="failure_policy= and tokenize_concurrency= are for raw text"):
            TokenLoader(documents, context_length=4, batch_size=1, failure=policy)  # type: ignore[arg-type]


def test_a_failure_records_old_attribute_names_warn_and_give_the_one_name() -> None:
    from stoker.failures import Failure

    failure = Failure("k3", "decode", "ValueError: no", action="skipped", position=7)
    for old, new, value in (
        ("key", "sample", "k3"),
        ("name", "sample", "k3"),
        ("reason", "error", "ValueError: no"),
        ("message", "error", "ValueError: no"),
        ("index", "position", 7),
    ):
        with pytest.warns(DeprecationWarning, match=rf"Failure.{old} is now Failure.{new}"):
            assert getattr(failure, old) == value == getattr(failure, new)


def test_every_error_stoker_raises_is_a_stoker_error_and_keeps_its_builtin_base() -> None:
    from stoker import errors

    for name in errors.__all__:
        kind = getattr(errors, name)
        assert issubclass(kind, StokerError), name
    assert issubclass(errors.StorageError, OSError) and issubclass(errors.ImageDecodeError, ValueError)
    assert issubclass(errors.MediaUnavailableError, ImportError) and issubclass(errors.PipelineError, RuntimeError)
    assert not issubclass(errors.MediaDecodeError, errors.ImageDecodeError)
    assert issubclass(errors.MediaDecodeError, errors.DecodeError) and issubclass(errors.ImageDecodeError, errors.DecodeError)


def test_one_failure_record_from_storage_decode_and_loader_alike() -> None:
    from stoker.failures import Failure
    from stoker.ops import ImageTransform, decode_batch

    storage = _storage(4)
    storage.read_many(["k00", "missing"], on_error="skip")
    decoded = decode_batch([b"not an image"], ImageTransform(resize=(8, 8)), names=["x.jpg"], on_error="zero")
    records = [storage.failures[0], decoded.failures[0]]
    assert all(type(record) is Failure for record in records)
    assert [(record.sample, record.stage, record.action) for record in records] == [
        ("missing", "read", "skipped"),
        ("x.jpg", "decode", "zero-filled"),
    ]
    assert "missing" in records[0].describe() and records[0].source == "MemoryStorage"
    assert np.asarray(decoded.valid).tolist() == [False]
