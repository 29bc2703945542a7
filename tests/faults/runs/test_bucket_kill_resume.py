"""A bucketed epoch killed mid-way (SIGKILL, buckets partly read, samples carried in from the
epoch before) resumes exactly: the batches delivered before the checkpoint plus those of the
resumed run are the uninterrupted epoch's, each sample once, every batch one bucket's shape."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from stoker import Loader
from stoker.loader import Sampling
from stoker.ops import ImageTransform
from stoker.sampling import Buckets
from stoker_testbed.data.images import jpeg

SIZES = [(96, 64), (64, 96), (128, 48), (80, 80), (120, 60)]
SHAPES = [(48, 64), (64, 48), (32, 96), (56, 56)]

RUN = textwrap.dedent(
    f"""
    import json, os, signal, sys
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.ops import ImageTransform
    from stoker.sampling import Buckets

    buckets = Buckets({SHAPES!r}, crop="random", leftovers="carry")
    loader = Loader(sys.argv[1], batch_size=4, transform=ImageTransform(), sampling=Sampling(seed=8, in_order=True, buckets=buckets))
    loader.set_epoch(1)  # samples carried in from epoch 0
    delivered = []
    for step, batch in enumerate(loader):
        delivered.append(list(batch.keys))
        if step == 9:
            with open(sys.argv[2], "w") as file:
                json.dump({{"state": loader.state_dict(), "delivered": delivered}}, file)
        if step == 14:
            os.kill(os.getpid(), signal.SIGKILL)  # 5 batches after the checkpoint, lost
    """
)


def test_a_killed_bucketed_epoch_resumes_with_each_sample_once(tmp_path: Path) -> None:
    folder = tmp_path / "photos" / "any"
    folder.mkdir(parents=True)
    for index in range(160):
        width, height = SIZES[index % len(SIZES)]
        (folder / f"{index:04d}.jpg").write_bytes(jpeg(width, height, seed=index, quality=80))
    options = {
        "batch_size": 4,
        "transform": ImageTransform(),
        "sampling": Sampling(seed=8, in_order=True, buckets=Buckets(SHAPES, crop="random", leftovers="carry")),
    }
    whole = Loader(str(tmp_path / "photos"), **options)  # type: ignore[arg-type]
    whole.set_epoch(1)
    reference = [list(batch.keys) for batch in whole]
    whole.close()
    checkpoint = tmp_path / "checkpoint.json"
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path / "photos"), str(checkpoint)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    saved = json.loads(checkpoint.read_text())
    resumed = Loader(str(tmp_path / "photos"), **options)  # type: ignore[arg-type]
    resumed.load_state_dict(saved["state"])
    shapes = set()
    rest = []
    for batch in resumed:
        rest.append(list(batch.keys))
        shapes.add(batch.data.shape[1:3])
    resumed.close()
    assert saved["delivered"] + rest == reference, "the same batches, in the same order, across the kill"
    assert max(Counter(key for keys in saved["delivered"] + rest for key in keys).values()) == 1
    assert len(shapes) > 1 and shapes <= set(SHAPES)
