"""Journey: an ImageFolder tree, made as torchvision users make one, trained with Lightning
through `StokerDataModule`, killed mid-epoch (SIGKILL) and resumed by running the same script
again with ``fit(ckpt_path="last")``.

The script (`train`) is docs/lightning.md's: a default ``L.Trainer`` plus the lines that page
gives (the data module, and the ``ModelCheckpoint`` a mid-epoch resume needs). The tree comes
from torchvision itself (``FakeData``'s PIL images saved in class folders, read back by
``torchvision.datasets.ImageFolder``). The resumed run trains, step for step, the batches of an
unkilled run: the same samples, and the same augmented pixels.

Run as a script, this file is the training job: ``python test_imagefolder_to_lightning.py
[--resume]`` in a folder holding ``train/``; ``JOURNEY_RUN`` names its step log
(``log-<run>-0.jsonl``: step, epoch, keys, a digest of the batch's pixels) and ``JOURNEY_KILL_AT``
the step at which it SIGKILLs itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning", reason="needs PyTorch Lightning (pip install 'stoker[lightning]')")
pytest.importorskip("torchvision", reason="the ImageFolder tree is made and checked by torchvision")

import lightning as L  # noqa: E402 - after the skips
import torch  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402

from stoker.lightning import StokerDataModule  # noqa: E402
from stoker.loader import Sampling  # noqa: E402
from stoker.ops import ImageTransform  # noqa: E402
from stoker_testbed.resume_runs import assert_resumed_exactly, job_records  # noqa: E402

IMAGES, CLASSES = 45, ["bird", "cat", "dog"]
BATCH, SAVE_EVERY = 4, 5  # 12 steps an epoch (the last of one image), last.ckpt every 5 steps
KILL_AT = 17  # in the second epoch (steps 12-23), after the save at step 15
pytestmark = pytest.mark.timeout(300)


class Classifier(L.LightningModule):
    """docs/lightning.md's model, and the test's instruments: each step's record, the kill."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3 * 8 * 8, len(CLASSES))

    def training_step(self, batch: dict[str, Any], batch_index: int) -> torch.Tensor:
        if self.global_step == int(os.environ.get("JOURNEY_KILL_AT", -1)):
            os.kill(os.getpid(), signal.SIGKILL)
        record = {
            "step": self.global_step,
            "epoch": self.current_epoch,
            "rank": self.global_rank,
            "keys": list(batch["keys"]),
            "labels": batch["labels"].tolist(),
            "pixels": hashlib.sha256(batch["data"].cpu().numpy().tobytes()).hexdigest(),
        }
        with open(f"log-{os.environ.get('JOURNEY_RUN', 'run')}-{self.global_rank}.jsonl", "a") as log:
            log.write(json.dumps(record) + "\n")
        images = torch.nn.functional.avg_pool2d(batch["data"], 4).flatten(1)  # float32 CHW, normalized
        return torch.nn.functional.cross_entropy(self.layer(images), batch["labels"])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def train(resume: bool) -> None:
    """The user's script: Lightning's defaults and docs/lightning.md's lines."""
    transform = ImageTransform(
        random_resized_crop=32, flip_probability=0.5, layout="CHW", dtype="float32", mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]
    )
    data = StokerDataModule("train/", batch_size=BATCH, transform=transform, sampling=Sampling(seed=0, in_order=True))
    checkpoints = ModelCheckpoint(dirpath="checkpoints", save_last=True, every_n_train_steps=SAVE_EVERY)
    trainer = L.Trainer(max_epochs=2, callbacks=[checkpoints])
    trainer.fit(Classifier(), datamodule=data, ckpt_path="last" if resume else None)


def make_image_folder(root: Path) -> None:
    """torchvision's FakeData images (PIL) saved as JPEGs in one folder per class."""
    import torchvision

    for index, (image, label) in enumerate(torchvision.datasets.FakeData(size=IMAGES, image_size=(3, 48, 64), num_classes=len(CLASSES))):
        folder = root / CLASSES[label]
        folder.mkdir(parents=True, exist_ok=True)
        image.save(folder / f"{index:05d}.jpg")


def run_script(work: Path, run: str, *arguments: str, kill_at: int = -1) -> tuple[int, str]:
    """This file as the training job in ``work``, in a session of its own (a timeout ends all
    of it): its exit status and output."""
    environment = {**os.environ, "JOURNEY_RUN": run, "JOURNEY_KILL_AT": str(kill_at)}
    command = [sys.executable, __file__, *arguments]
    with subprocess.Popen(
        command, cwd=work, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as job:
        try:
            output, _ = job.communicate(timeout=240)
        except BaseException:
            os.killpg(job.pid, signal.SIGKILL)
            raise
    return job.returncode, output


def test_an_image_folder_trained_with_lightning_resumes_mid_epoch_after_a_kill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchvision

    images = tmp_path / "images"
    make_image_folder(images)
    folder = torchvision.datasets.ImageFolder(str(images))  # a real ImageFolder, as torchvision reads it
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    for work in (killed, reference):
        work.mkdir()
        (work / "train").symlink_to(images, target_is_directory=True)

    status, output = run_script(killed, "0", kill_at=KILL_AT)
    assert status == -signal.SIGKILL, output[-3000:]
    assert (killed / "checkpoints" / "last.ckpt").is_file(), sorted(path.name for path in killed.rglob("*"))
    status, resumed_output = run_script(killed, "1", "--resume")
    assert status == 0, resumed_output[-3000:]
    monkeypatch.chdir(reference)
    monkeypatch.setenv("JOURNEY_RUN", "0")
    train(resume=False)

    assert f"Restored all states from the checkpoint at {killed / 'checkpoints' / 'last.ckpt'}" in resumed_output, resumed_output[-3000:]
    for text in ("no last checkpoint available", "StokerDataModule:", "val_dataloader"):
        assert text not in output and text not in resumed_output, text
    after, whole = job_records(killed, 1), job_records(reference, 0)
    resumed_at = min(record["step"] for record in after)
    assert resumed_at == 15  # the last save before the kill, mid-epoch
    before = [record for record in job_records(killed, 0) if record["step"] < resumed_at]
    assert_resumed_exactly(before, after, whole, samples=IMAGES, resumed_at=resumed_at, epoch_of=lambda record: record["epoch"])
    assert {record["step"]: record["pixels"] for record in before + after} == {record["step"]: record["pixels"] for record in whole}
    # Each image's label is the one torchvision's ImageFolder gives it (class folders, sorted).
    targets = {str(Path(path).relative_to(images)): target for path, target in folder.samples}
    labels = {key: label for record in whole for key, label in zip(record["keys"], record["labels"])}
    assert labels == targets and folder.classes == CLASSES


if __name__ == "__main__":
    train(resume="--resume" in sys.argv)
