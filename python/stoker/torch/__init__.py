"""PyTorch integration: a drop-in `DataLoader` with threads and within-batch concurrency, and a
`LoaderDataset` view of a `stoker.Loader`. Importing this module needs torch."""

from ._dataloader import DataLoader
from ._dataset import LoaderDataset

__all__ = ["DataLoader", "LoaderDataset"]
