"""A run killed mid-epoch resumes on another number of ranks with another batch size (a batch-size
ramp-up, a job moved to more or fewer GPUs): every sample of the epoch is delivered exactly once
over the two runs, every rank of the resumed run takes the same number of steps, and
`verify_epoch` proves it. For the plain shuffle, the block shuffle and a mixture, from 2 ranks to 3
and from 3 to 2. A bucketed order (aspect-ratio buckets over JPEGs) moves to another world with its
batch size: the rest of the epoch is dealt a whole batch of one bucket at a time, each sample of the
uninterrupted epoch once; with another per-rank batch size, what no rank delivered is cut again
by bucket for the new size (each bucket's last partial batch of it left over for a later epoch)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError, ProvenanceError
from stoker.loader import Sampling
from stoker.ops import ImageTransform
from stoker.sampling import Buckets
from stoker.storage import MemoryStorage
from stoker_testbed.data.images import jpeg

SAMPLES = 1009  # prime: no world size or batch size divides it

STORAGES = textwrap.dedent(
    f"""
    from stoker.storage import MemoryStorage, MixedStorage

    class Blocks(MemoryStorage):
        '''Samples in blocks of 17, as shards hold them: for the block shuffle.'''
        def block_sizes(self):
            return [min(17, len(self) - start) for start in range(0, len(self), 17)]
        def max_open_blocks(self):
            return None
        def stream_blocks(self):
            pass
        def prefetch_blocks(self, blocks):
            pass

    SHAPES = [(24, 16), (16, 24), (20, 20)]

    def samples(kind):
        if kind == "buckets":  # JPEGs of three aspect ratios
            from stoker_testbed.data.images import jpeg
            return MemoryStorage({{f"k{{index:05d}}": jpeg(*SHAPES[index % 3], seed=index) for index in range({SAMPLES})}})
        data = {{f"k{{index:05d}}": index.to_bytes(4, "little") for index in range({SAMPLES})}}
        if kind == "blocks":
            return Blocks(data)
        if kind == "mixture":
            other = MemoryStorage({{f"o{{index:05d}}": b"o" for index in range(400)}})
            return MixedStorage({{"main": MemoryStorage(data), "other": other}}, {{"main": 0.7, "other": 0.3}}, num_samples={SAMPLES}, seed=4)
        return MemoryStorage(data)

    def loader(kind, rank, world, batch):
        from stoker import Loader
        from stoker.loader import Sampling
        if kind == "buckets":
            from stoker.ops import ImageTransform
            from stoker.sampling import Buckets
            sampling = Sampling(seed=9, rank=rank, world_size=world, buckets=Buckets(SHAPES))
            return Loader(samples(kind), batch_size=batch, transform=ImageTransform(), sampling=sampling)
        shuffle = "block" if kind == "blocks" else True
        return Loader(samples(kind), batch_size=batch, sampling=Sampling(seed=9, shuffle=shuffle, rank=rank, world_size=world))
    """
)

# Ranks in lockstep in one process (a rank is its Sampling), as a job's ranks step together:
# each rank's states are saved at step 20, the job is killed 3 steps later (those batches are lost).
RUN = STORAGES + textwrap.dedent(
    """
    import json, os, signal, sys

    kind, world, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    loaders = [loader(kind, rank, world, batch) for rank in range(world)]
    streams = [iter(loader) for loader in loaders]
    delivered = []
    for step in range(24):
        for stream in streams:
            batch_now = next(stream)
            delivered += [key for key, padding in zip(batch_now.keys, batch_now.padding) if not padding]
        if step == 20:
            with open(out, "w") as file:
                json.dump({"states": [loader.state_dict() for loader in loaders], "delivered": delivered}, file)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)

RESUME = STORAGES + textwrap.dedent(
    """
    import json, logging, sys

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    kind, world, batch, saved = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.load(open(sys.argv[4]))
    loaders = [loader(kind, rank, world, batch) for rank in range(world)]
    steps, delivered, sizes, shapes = [], [], set(), []
    for resumed in loaders:
        resumed.load_state_dict(saved["states"])
        count = 0
        for batch_now in resumed:
            count += 1
            sizes.add(len(batch_now.keys))
            shapes.append(list(batch_now.data.shape) if kind == "buckets" else [])
            delivered += [key for key, padding in zip(batch_now.keys, batch_now.padding) if not padding]
        steps.append(count)
    proof = loaders[0].verify_epoch([resumed.state_dict() for resumed in loaders])
    print(json.dumps({"steps": steps, "delivered": delivered, "proof": proof, "sizes": sorted(sizes), "shapes": shapes}))
    """
)


def expected_keys(kind: str) -> Counter[str]:
    """Each sample the epoch deals, once: the dataset's, or the mixture's draw of this epoch."""
    if kind != "mixture":
        return Counter({f"k{index:05d}": 1 for index in range(SAMPLES)})
    code = STORAGES + "\nimport json\nstorage = samples('mixture')\nstorage.set_epoch(0)\nprint(json.dumps(list(storage.keys)))"
    keys = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout)
    return Counter(keys)


@pytest.mark.parametrize("kind", ["uniform", "blocks", "mixture"])
@pytest.mark.parametrize(("before", "after"), [((2, 8), (3, 12)), ((3, 12), (2, 8))])
def test_a_killed_run_resumes_on_another_world_with_another_batch_size(
    tmp_path: Path, kind: str, before: tuple[int, int], after: tuple[int, int]
) -> None:
    saved = tmp_path / "saved.json"
    killed = subprocess.run([sys.executable, "-c", RUN, kind, *map(str, before), str(saved)], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = subprocess.run(
        [sys.executable, "-c", RESUME, kind, *map(str, after), str(saved)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    delivered = Counter(json.loads(saved.read_text())["delivered"]) + Counter(result["delivered"])
    truth = expected_keys(kind)
    assert delivered == truth, (
        f"missing {sorted(truth - delivered)[:5]}, more than once {sorted(key for key, count in delivered.items() if count > 1)[:5]}"
    )
    assert len(set(result["steps"])) == 1, f"equal steps on every rank: {result['steps']}"
    assert max(result["sizes"]) == after[1], "the resumed run's batches are of its own size"
    assert result["proof"]["delivered"] == SAMPLES


def uninterrupted_bucketed(world: int, batch: int) -> Counter[str]:
    """The truth: what the bucketed epoch delivers on the world it began on, uninterrupted."""
    scripts: dict[str, object] = {}
    exec(STORAGES, scripts)
    truth: Counter[str] = Counter()
    for rank in range(world):
        uninterrupted = scripts["loader"]("buckets", rank, world, batch)  # type: ignore[operator]
        for each in uninterrupted:
            truth.update(each.keys)
        uninterrupted.close()
    return truth


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 2)])
def test_a_killed_bucketed_run_resumes_on_another_world_in_whole_batches_of_one_bucket(tmp_path: Path, before: int, after: int) -> None:
    saved = tmp_path / "saved.json"
    killed = subprocess.run(
        [sys.executable, "-c", RUN, "buckets", str(before), "8", str(saved)], capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = subprocess.run(
        [sys.executable, "-c", RESUME, "buckets", str(after), "8", str(saved)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "dealt a whole batch at a time" in resumed.stderr, "the change of world is logged"
    print(next(line for line in resumed.stderr.splitlines() if "bucketed epoch" in line))  # the closing note quotes it
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    delivered = Counter(json.loads(saved.read_text())["delivered"]) + Counter(result["delivered"])
    truth = uninterrupted_bucketed(before, 8)
    assert delivered == truth, (
        f"missing {sorted(truth - delivered)[:5]}, more than once {sorted(key for key, count in delivered.items() if count > 1)[:5]}"
    )
    assert len(set(result["steps"])) == 1, f"equal steps on every rank: {result['steps']}"
    assert {tuple(shape) for shape in result["shapes"]} <= {(8, 24, 16, 3), (8, 16, 24, 3), (8, 20, 20, 3)}, "whole batches of one bucket"
    assert result["proof"]["delivered"] == sum(truth.values()) and result["proof"]["left_over"] == SAMPLES - sum(truth.values())


@pytest.mark.parametrize(("before", "after"), [((2, 8), (3, 6)), ((3, 8), (2, 12))])
def test_a_killed_bucketed_run_resumes_with_another_batch_size_in_whole_batches_of_one_bucket(
    tmp_path: Path, before: tuple[int, int], after: tuple[int, int]
) -> None:
    saved = tmp_path / "saved.json"
    killed = subprocess.run(
        [sys.executable, "-c", RUN, "buckets", *map(str, before), str(saved)], capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = subprocess.run(
        [sys.executable, "-c", RESUME, "buckets", *map(str, after), str(saved)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    print(next(line for line in resumed.stderr.splitlines() if "cut again by bucket" in line))  # the closing note quotes it
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    delivered = Counter(json.loads(saved.read_text())["delivered"]) + Counter(result["delivered"])
    truth = uninterrupted_bucketed(*before)
    assert max(delivered.values()) == 1, f"more than once: {sorted(key for key, count in delivered.items() if count > 1)[:5]}"
    assert not set(delivered) - set(truth), "only samples of the epoch"
    # Each bucket's last partial batch of the new size waits for a later epoch: fewer than a batch a bucket.
    assert 0 <= sum(truth.values()) - sum(delivered.values()) < 3 * after[1]
    assert len(set(result["steps"])) == 1, f"equal steps on every rank: {result['steps']}"
    assert {tuple(shape) for shape in result["shapes"]} <= {(after[1], 24, 16, 3), (after[1], 16, 24, 3), (after[1], 20, 20, 3)}, (
        "whole batches of one bucket, of the new size"
    )
    proof = result["proof"]
    assert proof["delivered"] == sum(delivered.values()) and proof["delivered"] + proof["left_over"] == SAMPLES


def test_another_batch_size_with_buckets_is_refused_by_name_where_it_cannot_be_taken() -> None:
    sizes = [(96, 64), (64, 96), (80, 80)]
    data = MemoryStorage({f"k{index}.jpg": jpeg(*sizes[index % 3], seed=index) for index in range(60)})

    def loader(batch: int, leftovers: str = "drop") -> Loader:
        buckets = Buckets([(48, 64), (64, 48), (56, 56)], leftovers=leftovers)
        sampling = Sampling(seed=1, buckets=buckets)
        return Loader(data, batch_size=batch, transform=ImageTransform(), sampling=sampling)

    first = loader(4)
    stream = iter(first)
    for _ in range(3):
        next(stream)
    state = first.state_dict()
    with pytest.raises(ConfigurationError, match=r"another batch size \(4 then, 6 now\) from every rank's states"):
        loader(6).load_state_dict(state)
    resumed = loader(6)
    resumed.load_state_dict([state])  # every rank's states (one rank here): the rest is cut again
    counts = resumed.bucket_counts()
    assert counts is not None and counts["cut"]["batch_size_before"] == 4 and counts["batches"] * 4 == first.sampler.epoch_length
    assert {len(batch.keys) for batch in resumed} == {6}
    proof = resumed.verify_epoch()
    assert proof["delivered"] == 12 + counts["cut"]["batches"] * 6 and proof["delivered"] + proof["left_over"] == 60
    carried = loader(4, "carry")
    carried_state = carried.state_dict()
    for allow_changes in (False, True):
        with pytest.raises(ProvenanceError, match=r"whose leftovers are carried resumes with its batch size"):
            loader(6, "carry").load_state_dict([carried_state], allow_changes=allow_changes)
