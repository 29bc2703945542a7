"""The trainers' adapters on bad checkpoints: a Hugging Face checkpoint folder without stoker's
loader state is refused with the file named, before any batch is read (a silent fresh start
would train the epoch's first part twice)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker.loader import Sampling
from stoker.storage import MemoryStorage

pytest.importorskip("transformers", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")
pytest.importorskip("accelerate", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")


def _trainer(output: Path) -> Any:
    import torch
    from transformers import TrainingArguments

    from stoker.accelerate import StokerTrainer

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def forward(self, values: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"loss": torch.nn.functional.mse_loss(self.layer(values), values)}

    storage = MemoryStorage({f"s{index:03d}": np.float32(index).tobytes() for index in range(40)})
    arguments = TrainingArguments(
        output_dir=str(output), per_device_train_batch_size=4, max_steps=4, save_steps=4, use_cpu=True, report_to=[], logging_strategy="no"
    )
    return StokerTrainer(
        model=Model(),
        args=arguments,
        train_storage=storage,
        sampling=Sampling(seed=1),
        loader_options={"decode": lambda data: np.frombuffer(data, np.float32).copy()},
        inputs=lambda batch: {"values": torch.from_numpy(np.stack(batch["data"]))},
    )


def test_a_checkpoint_folder_without_the_loader_state_is_refused_by_name(tmp_path: Path) -> None:
    from stoker.accelerate import LOADER_STATE_NAME

    _trainer(tmp_path).train()
    checkpoint = tmp_path / "checkpoint-4"
    assert (checkpoint / LOADER_STATE_NAME).is_file()
    (checkpoint / LOADER_STATE_NAME).unlink()
    with pytest.raises(FileNotFoundError, match=f"{LOADER_STATE_NAME}: this checkpoint holds no stoker loader state"):
        _trainer(tmp_path).train(resume_from_checkpoint=str(checkpoint))


def test_resume_from_the_latest_checkpoint_finds_none_and_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no valid checkpoint found in output directory"):
        _trainer(tmp_path).train(resume_from_checkpoint=True)
