"""Benchmarks refuse a debug build of the native core, and say how to rebuild."""

from __future__ import annotations

import pytest

from stoker import _native
from stoker.bench import _build, require_optimized_core


def test_an_optimized_core_is_measured() -> None:
    assert _native.build_info()["optimized"], "the tests run on the optimized build pip installs"
    require_optimized_core()


def test_a_debug_core_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_build._native, "build_info", lambda: {"version": "0.1.0", "optimized": False, "target_features": []})
    with pytest.raises(SystemExit, match="debug build.*benchmarks refuse.*maturin develop --release"):
        require_optimized_core()
