"""The trainers' adapters on bad checkpoints: a Hugging Face checkpoint folder without stoker's
loader state is refused with the file named, before any batch is read (a silent fresh start
would train the epoch's first part twice); ``resume_from_checkpoint=True`` passes over a latest
folder without it (a run stopped while saving) and says so; a resume that the Trainer will not
step as an uninterrupted run (gradient accumulation split by the resume) is said."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker.loader import Sampling
from stoker.storage import MemoryStorage

pytest.importorskip("transformers", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")
pytest.importorskip("accelerate", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")


def _trainer(output: Path, **arguments: Any) -> Any:
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
    settings = {"max_steps": 4, "save_steps": 4, **arguments}
    training = TrainingArguments(
        output_dir=str(output), per_device_train_batch_size=4, use_cpu=True, report_to=[], logging_strategy="no", **settings
    )
    return StokerTrainer(
        model=Model(),
        args=training,
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


def test_resume_from_the_latest_passes_over_a_checkpoint_saved_without_the_loader_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from stoker.accelerate import LOADER_STATE_NAME

    _trainer(tmp_path, save_steps=2).train()
    (tmp_path / "checkpoint-4" / LOADER_STATE_NAME).unlink()  # as if killed between the Trainer's save and the Loader's
    resumed = _trainer(tmp_path, save_steps=2)
    with caplog.at_level(logging.WARNING, logger="stoker.accelerate"):
        resumed.train(resume_from_checkpoint=True)
    assert (
        f"checkpoint-4: no {LOADER_STATE_NAME} (the run stopped while saving it?); resuming from {tmp_path / 'checkpoint-2'}" in caplog.text
    )
    assert resumed.state.global_step == 4 and resumed.train_loader.loader.step == 4  # 2 batches from the checkpoint, 2 after


def test_a_resume_that_splits_a_gradient_accumulation_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # 40 samples in batches of 4: 10 batches an epoch, stepped 4 + 4 + 2 with accumulation over 4.
    settings = {"max_steps": -1, "num_train_epochs": 1, "save_steps": 1, "gradient_accumulation_steps": 4}
    uninterrupted = _trainer(tmp_path / "whole", **settings)
    uninterrupted.train()
    resumed = _trainer(tmp_path / "whole", **settings)
    with caplog.at_level(logging.WARNING, logger="stoker.accelerate"):
        resumed.train(resume_from_checkpoint=str(tmp_path / "whole" / "checkpoint-1"))
    assert (
        "gradient_accumulation_steps=4 with 10 batches an epoch: after a mid-epoch resume the Trainer steps this epoch's last 2 batches"
        in caplog.text
    )
    assert (uninterrupted.state.global_step, resumed.state.global_step) == (3, 2)  # what the warning says
