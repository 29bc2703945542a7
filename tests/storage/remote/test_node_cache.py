"""One cache per node: three local ranks, each its own process, share one `cache_dir`; over three
epochs the node fetches each sample from the server once (a hedged copy of a stalled request
aside), on each object store (S3, GCS, Azure)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.buckets import TestBucket

RANK = """
import json, os, sys, time
from stoker import Loader
from stoker.storage import open_storage
url, cache, rank, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
options = json.loads(os.environ["STOKER_TEST_STORE_OPTIONS"])  # the emulator's endpoint and keys: not on the command line
epochs = []
with open_storage(url, cache_dir=cache, cache_bytes=64 << 20, **options) as storage:
    before = storage.stats()  # windows end to end: a request completing between two epochs counts in one of them
    loader = Loader(storage, batch_size=8, seed=3, rank=rank, world_size=3)
    for epoch in range(3):
        if epoch == 2:
            # Every rank is through epoch 1, so every sample was read once: epoch 2 (all hits)
            # takes in the early requests for it, which may have been the first of a sample
            # that a slower rank had yet to read in epoch 0, counted once they complete.
            open(os.path.join(barrier, str(rank)), "w").close()
            while len(os.listdir(barrier)) < 3:
                time.sleep(0.02)
        loader.set_epoch(epoch)
        keys = [key for batch in loader for key, padding in zip(batch.keys, batch.padding) if not padding]
        after = storage.stats()
        epochs.append({"keys": keys, "fetched": after["requests"] - before["requests"], "hits": after["cache_hits"] - before["cache_hits"],
                       "hedged": loader.prefetcher.hedged})
        before = after
print(json.dumps(epochs))
"""


def test_local_ranks_share_one_cache_and_never_fetch_a_sample_twice(object_bucket: TestBucket, tmp_path: Path) -> None:
    source = dataset(150)
    for key, payload in zip(source.keys, source.read_many(source.keys)):
        object_bucket.put(f"d/{key}", payload)
    environment = {**os.environ, "STOKER_TEST_STORE_OPTIONS": json.dumps(object_bucket.options())}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, object_bucket.url("d"), str(tmp_path / "cache"), str(rank), str(barrier)],
            stdout=subprocess.PIPE,
            env=environment,
        )
        for rank in range(3)
    ]
    outputs = [rank.communicate(timeout=300)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0, 0]
    epochs = [json.loads(output) for output in outputs]
    for epoch in range(3):
        keys = [key for rank in epochs for key in rank[epoch]["keys"]]
        assert sorted(keys) == sorted(source.keys), f"epoch {epoch}: every sample once over the ranks"
    # The ranks run unsynchronized through epochs 0 and 1 (a rank in epoch 1 may ask for a
    # sample another has yet to read in epoch 0), and each asks for the next epoch's first
    # samples early: the node still fetches each sample once, the other reads waiting for that
    # fetch or hitting its entry.
    fetched = sum(epoch["fetched"] for rank in epochs for epoch in rank)
    hits = sum(epoch["hits"] for rank in epochs for epoch in rank)
    # A hedged copy (a request sent again because it stalled) fetches on its own, as it would
    # without a cache: the only fetches beyond one per sample.
    hedged = sum(epoch["hedged"] for rank in epochs for epoch in rank)
    assert len(source) <= fetched <= len(source) + hedged, f"the node fetched {fetched} samples for {len(source)} ({hedged} hedged copies)"
    assert hits >= len(source), "every second read of a sample is a hit"
