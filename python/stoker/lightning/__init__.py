"""PyTorch Lightning: a `StokerDataModule` (a Loader per rank from the Trainer's strategy), and
`LightningLoader` to return a Loader from your own ``train_dataloader()``; either way the
Loader's state rides in Lightning's checkpoints and ``fit(ckpt_path=...)`` resumes it exactly,
mid-epoch. Needs ``pip install 'stoker[lightning]'``."""

from ._data_module import StokerDataModule
from ._train_loader import LightningLoader

__all__ = ["LightningLoader", "StokerDataModule"]
