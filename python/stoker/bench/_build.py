"""Numbers come only from an optimized native core: a debug build is about 10x slower, and a
ratio measured with it would say nothing about stoker."""

from __future__ import annotations

from .. import _native

__all__ = ["require_optimized_core"]


def require_optimized_core() -> None:
    """Refuse to measure with a debug build of the native core.

    Raises:
        SystemExit: The core was compiled without optimizations; the message says how to rebuild.
    """
    info = _native.build_info()
    if not info["optimized"]:
        raise SystemExit(
            f"stoker's native core {info['version']} is a debug build (about 10x slower): benchmarks refuse to report its "
            "numbers. Rebuild it optimized: pip install -e . (maturin builds release by default), or maturin develop --release"
        )
