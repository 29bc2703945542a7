"""The operator's inputs are input: any text as a filter (`Sampling(where=...)`), any value as a
saved state's mixture schedule or exclusion digest, either works or is a `ConfigurationError`
that names it; nothing else escapes, nothing hangs, nothing aborts."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling, Where
from stoker.storage import MemoryStorage, MixedStorage

DATA = MemoryStorage({f"s{index}": b"x" for index in range(50)})
TABLE = {"key": [f"s{index}" for index in range(50)], "score": [index / 50 for index in range(50)], "lang": ["en", "de"] * 25}
ATOMS = st.sampled_from(
    [
        "score",
        "lang",
        "width",
        "0.5",
        "'en'",
        "[1, 'a']",
        "true",
        "(",
        ")",
        "and",
        "or",
        "not",
        "in",
        "<",
        ">=",
        "==",
        "+",
        "-",
        "**",
        "x.y",
        "f(x)",
        "lambda: 1",
        ",",
    ]
)
OPERANDS = st.sampled_from(
    ["score", "lang", "width", "0.5", "-1", "'en'", "[1, 'a']", "[0.5]", "(1, 2)", "true", "None", "1j", "b'x'", "...", "(score < 1)"]
)
OPERATORS = st.sampled_from(["<", "<=", ">", ">=", "==", "!=", "in", "not in", "is"])
COMPARISONS = st.builds(lambda left, operator, right: f"{left} {operator} {right}", OPERANDS, OPERATORS, OPERANDS)
SHAPED = st.lists(COMPARISONS, min_size=1, max_size=4).flatmap(
    lambda parts: st.lists(st.sampled_from([" and ", " or ", " and not "]), min_size=len(parts) - 1, max_size=len(parts) - 1).map(
        lambda joiners: parts[0] + "".join(joiner + part for joiner, part in zip(joiners, parts[1:]))
    )
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(expression=st.text(max_size=60) | st.lists(ATOMS, min_size=1, max_size=12).map(" ".join) | SHAPED)
def test_any_text_as_a_filter_keeps_a_subset_or_is_named(expression: str) -> None:
    try:
        kept = Loader(DATA, batch_size=8, sampling=Sampling(where=Where(expression, table=TABLE))).storage
    except ConfigurationError as error:
        assert "where" in str(error)
        return
    assert 0 < len(kept) <= len(DATA)


def _mixture_loader() -> Loader:
    big = MemoryStorage({f"b{index}": b"b" for index in range(200)})
    small = MemoryStorage({f"m{index}": b"m" for index in range(50)})
    return Loader(MixedStorage({"big": big, "small": small}, {"big": 0.7, "small": 0.3}, num_samples=100, seed=1), batch_size=10)


SAVED = _mixture_loader()
SAVED.set_mixture_schedule({0: {"big": 0.7, "small": 0.3}, 5: {"big": 0.2, "small": 0.8}})
STATE = SAVED.state_dict()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(part=st.sampled_from(["mixture_schedule", "excluded_digest"]), value=JSON)
def test_any_value_as_a_saved_schedule_or_exclusion_loads_or_is_named(part: str, value: Any) -> None:
    state = {**STATE, part: value}
    try:
        _mixture_loader().load_state_dict(state)
    except ConfigurationError as error:
        assert part.replace("_", " ") in str(error).replace("_", " ") or "mixture schedule" in str(error)
