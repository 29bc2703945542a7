"""Type stubs for the native core, `stoker._native` (Rust, built by maturin)."""

from typing import TypedDict

__version__: str

class BuildInfo(TypedDict):
    version: str
    optimized: bool
    target_features: list[str]

def build_info() -> BuildInfo:
    """Describe this build of the native core: version, optimization, CPU features."""
