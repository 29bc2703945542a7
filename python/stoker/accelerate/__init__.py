"""Hugging Face Accelerate and Trainer: `AcceleratedLoader` for an Accelerate loop (batches on
the accelerator's device, the Loader's exact place in ``save_state``/``load_state``), and
`StokerTrainer`, a ``transformers.Trainer`` fed by a Loader that resumes its epoch from its own
checkpoints without re-reading it. Accelerate and transformers are imported only where used."""

from typing import Any

from ._accelerated_loader import AcceleratedLoader

__all__ = ["LOADER_STATE_NAME", "AcceleratedLoader", "StokerTrainer"]


def __getattr__(name: str) -> Any:
    # transformers is heavy and optional: imported when StokerTrainer is first asked for.
    if name in ("StokerTrainer", "LOADER_STATE_NAME"):
        from . import _trainer

        return getattr(_trainer, name)
    raise AttributeError(f"module 'stoker.accelerate' has no attribute {name!r}")
