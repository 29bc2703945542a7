"""`StokerDataModule` under Trainers as users make them: the first ``fit`` says what a Trainer
lacks for a mid-epoch resume with ``fit(ckpt_path="last")`` (and each claim is shown true
here: such a Trainer's "last" finds nothing), says nothing under the documented callback (whose
"last" is found), and Lightning sees a validation loader only when there is validation data."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("lightning", reason="needs PyTorch Lightning (pip install 'stoker[lightning]')")

import lightning as L  # noqa: E402 - after the skip: the module needs Lightning
import torch  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402

from stoker.lightning import StokerDataModule  # noqa: E402
from stoker.loader import Sampling  # noqa: E402
from stoker.storage import MemoryStorage  # noqa: E402

ADVICE = "StokerDataModule: "
NO_LAST = "is set, but there is no last checkpoint available"
VALIDATION_WARNING = "You passed in a `val_dataloader` but have no `validation_step`"


def decode_value(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32).copy()


def data(samples: int = 8, **options: Any) -> StokerDataModule:
    storage = MemoryStorage({f"s{index:03d}": np.float32(index).tobytes() for index in range(samples)})
    return StokerDataModule(storage, batch_size=2, sampling=Sampling(seed=3, in_order=True), decode=decode_value, **options)


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.trained: dict[int, list[str]] = {}  # step: keys

    def training_step(self, batch: dict[str, Any], batch_index: int) -> torch.Tensor:
        self.trained[self.global_step] = list(batch["keys"])
        values = torch.from_numpy(np.stack(batch["data"]))
        return torch.nn.functional.mse_loss(self.layer(values), values)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class ValidatedModel(Model):
    def __init__(self) -> None:
        super().__init__()
        self.validated: list[str] = []

    def validation_step(self, batch: dict[str, Any], batch_index: int) -> None:
        self.validated += list(batch["keys"])


def fit(
    model: L.LightningModule, module: StokerDataModule, ckpt_path: str | None = None, **trainer_options: Any
) -> tuple[L.Trainer, list[str]]:
    """``trainer.fit`` with the Trainer's defaults but for ``trainer_options`` (quiet, on the
    CPU); the Trainer and every warning's text."""
    options = {"max_epochs": 1, "accelerator": "cpu", "enable_progress_bar": False, "enable_model_summary": False, **trainer_options}
    trainer = L.Trainer(**options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model, datamodule=module, ckpt_path=ckpt_path)
    return trainer, [str(warning.message) for warning in caught]


def said(messages: list[str], text: str) -> list[str]:
    return [message for message in messages if text in message]


def test_the_default_trainer_is_told_what_to_set_and_its_last_finds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, messages = fit(Model(), data())
    [advice] = said(messages, ADVICE)
    assert "no ModelCheckpoint of this Trainer saves mid-epoch" in advice
    assert 'ModelCheckpoint(dirpath="checkpoints", save_last=True, every_n_train_steps=N)' in advice
    _, again = fit(Model(), data(), ckpt_path="last")
    assert said(again, NO_LAST), again  # what the advice warned of


def test_a_last_checkpoint_in_the_loggers_run_folder_is_named_and_is_not_found_by_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    callback = ModelCheckpoint(save_last=True, every_n_train_steps=1)  # no dirpath: the logger's run folder
    _, messages = fit(Model(), data(), callbacks=[callback])
    [advice] = said(messages, ADVICE)
    assert f"ModelCheckpoint saves last.ckpt in {tmp_path / 'lightning_logs' / 'version_0' / 'checkpoints'}, the logger's folder" in advice
    assert (tmp_path / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt").is_file()
    _, again = fit(Model(), data(), ckpt_path="last", callbacks=[ModelCheckpoint(save_last=True, every_n_train_steps=1)])
    assert said(again, NO_LAST), again  # the restarted run logged to version_1 and looked there


def test_the_documented_callback_draws_no_warning_and_last_resumes_mid_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = Model()
    documented = ModelCheckpoint(dirpath="checkpoints", save_last=True, every_n_train_steps=2)
    _, messages = fit(first, data(), callbacks=[documented], max_steps=3)  # stopped in the epoch's 4 steps
    assert not said(messages, ADVICE) and not said(messages, VALIDATION_WARNING), messages
    resumed = Model()
    trainer, again = fit(
        resumed, data(), ckpt_path="last", callbacks=[ModelCheckpoint(dirpath="checkpoints", save_last=True, every_n_train_steps=2)]
    )
    assert not said(again, NO_LAST) and Path(trainer.ckpt_path or "").name == "last.ckpt", again
    whole = Model()
    fit(whole, data(), enable_checkpointing=False)
    assert 0 < min(resumed.trained) < len(whole.trained)  # resumed in the epoch
    assert resumed.trained == {step: keys for step, keys in whole.trained.items() if step >= min(resumed.trained)}


def test_a_last_checkpoint_saved_at_epochs_ends_is_the_users_choice_and_draws_no_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, messages = fit(Model(), data(), callbacks=[ModelCheckpoint(dirpath="checkpoints", save_last=True)])
    assert not said(messages, ADVICE), messages
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()  # what a restart's "last" finds


def test_checkpointing_turned_off_is_the_users_choice_and_draws_no_advice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, messages = fit(Model(), data(), enable_checkpointing=False, logger=False)
    assert not said(messages, ADVICE), messages


def test_without_validation_data_lightning_sees_no_validation_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, messages = fit(Model(), data(), enable_checkpointing=False, logger=False)
    assert not said(messages, VALIDATION_WARNING), messages


def test_validation_data_is_validated_in_storage_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    storage = MemoryStorage({f"v{index:03d}": np.float32(index).tobytes() for index in range(5)})
    model = ValidatedModel()
    _, messages = fit(model, data(val_storage=storage), enable_checkpointing=False, logger=False, max_epochs=2)
    # Lightning's sanity check (its first 2 batches), then a whole validation after each epoch.
    every = [f"v{index:03d}" for index in range(5)]
    assert model.validated == every[:4] + every + every
    assert not said(messages, "validation_step") and not said(messages, "val_dataloader"), messages
