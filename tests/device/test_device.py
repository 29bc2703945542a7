"""The device path on the CPU (what CI has): tensors, validity and keys survive the transfer;
the CUDA stream path runs where a GPU is (benchmarks/loader/gpu_transfer.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stoker import Loader  # noqa: E402
from stoker.device import pinned_allocator, to_device  # noqa: E402
from stoker.loader import FailurePolicy, Sampling  # noqa: E402
from stoker.ops import ImageTransform  # noqa: E402
from stoker.storage import MemoryStorage  # noqa: E402
from stoker_testbed.data.images import jpeg  # noqa: E402


def test_batches_reach_the_cpu_device_intact() -> None:
    images = {f"k{index}": jpeg(64, 48, seed=index) for index in range(10)}
    images["k3"] = b"broken"
    storage = MemoryStorage(images, {key: index for index, key in enumerate(images)})
    loader = Loader(
        storage,
        batch_size=4,
        transform=ImageTransform(resize=(16, 16), layout="CHW", dtype="float32"),
        sampling=Sampling(shuffle="none", in_order=True),
        failure_policy=FailurePolicy(on_error="zero"),
    )
    moved = list(to_device(loader, "cpu"))
    assert [batch.host.index for batch in moved] == [0, 1, 2]
    for batch in moved:
        assert isinstance(batch.data, torch.Tensor) and batch.data.shape[1:] == (3, 16, 16)
        assert torch.equal(batch.labels, torch.from_numpy(batch.host.labels))
        assert np.array_equal(batch.data.numpy(), batch.host.data)
    assert moved[0].valid.tolist() == [True, True, True, False]
    assert [(failure.sample, failure.stage, failure.action) for failure in loader.failures] == [("k3", "decode", "zero-filled")]


def test_pinned_allocator_falls_back_to_numpy_without_cuda() -> None:
    array = pinned_allocator((2, 3), "float32")()
    assert array.shape == (2, 3) and array.dtype == np.float32
    if not torch.cuda.is_available():
        assert isinstance(array, np.ndarray)


def test_jax_path_places_batches() -> None:
    jax = pytest.importorskip("jax")
    from stoker.device import to_jax

    storage = MemoryStorage({f"k{index}": jpeg(32, 32, seed=index) for index in range(6)}, {f"k{index}": index for index in range(6)})
    loader = Loader(storage, batch_size=4, transform=ImageTransform(resize=(8, 8)), sampling=Sampling(shuffle="none", in_order=True))
    placed = list(to_jax(loader, ahead=1))
    assert [batch.index for _, _, batch in placed] == [0, 1]
    for data, labels, batch in placed:
        assert isinstance(data, jax.Array) and data.shape == batch.data.shape
        assert np.array_equal(np.asarray(data), batch.data) and labels.tolist() == batch.labels.tolist()
    data, labels = placed[0][2].to_jax()
    assert np.array_equal(np.asarray(data), placed[0][2].data)
