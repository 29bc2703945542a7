"""Block streaming and the epoch-boundary warm-up when the store misbehaves (real s3proxy): a block
cut short or dropped mid-read is retried with nothing lost or altered; a shard that is gone fails
each of its samples by name, every other sample delivered once; a warmed request of the next
epoch that fails is reported for that epoch's sample, not dropped or hung; a loader closed with
warm-up requests in flight leaves no thread behind; a block on a slow connection is sent again;
a process that exits with requests in flight and its storage never closed exits cleanly; a storage
closed under a running loader fails the samples still to come by name, and leaves no thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from stoker import Loader
from stoker.errors import SampleError
from stoker.ingest import upload_to_s3
from stoker.loader import FailurePolicy, Sampling
from stoker.storage import MemoryStorage, RetryPolicy, S3Storage, StorageClosedError
from stoker_testbed import LatencyProxy
from stoker_testbed.data.datasets import dataset, unique
from stoker_testbed.servers.s3_server import S3Server

PATIENT = RetryPolicy(attempts=20, base_delay=0.01, max_delay=0.2, deadline=60)
QUICK = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05, deadline=5)


def upload(s3_server: S3Server, source: MemoryStorage, **options: int | str) -> str:
    bucket = unique("faults-")
    s3_server.create_bucket(bucket)
    upload_to_s3(source, f"s3://{bucket}/d", progress=False, decode_check=False, **options, **s3_server.options())  # type: ignore[arg-type]
    return f"s3://{bucket}/d"


def truth(source: MemoryStorage, strip_extension: bool) -> dict[str, bytes]:
    keys = [key.rsplit(".", 1)[0] if strip_extension else key for key in source.keys]
    return dict(zip(keys, source.read_many(source.keys)))  # type: ignore[arg-type]


@pytest.mark.parametrize("after_bytes", [0, 9_000])
def test_a_block_that_fails_or_is_cut_short_mid_read_is_retried(s3_server: S3Server, after_bytes: int) -> None:
    source = dataset(300)
    url = upload(s3_server, source, to="shards", shard_size=60_000)
    expected = truth(source, strip_extension=True)
    with LatencyProxy("127.0.0.1", s3_server.port, delay=0.01) as proxy:
        options = {**s3_server.options(), "endpoint": f"http://{proxy.address[0]}:{proxy.address[1]}"}
        with S3Storage(url, block_bytes=40_000, retry=PATIENT, **options) as storage:
            storage.stream_blocks()
            proxy.cut_responses(3, after_bytes=after_bytes)
            keys = list(storage.keys)
            assert storage.read_many(keys) == [expected[key] for key in keys]
            assert proxy.cuts_left == 0, "every cut landed on a block in flight"
            assert storage.stats()["retries"] >= 1


def test_a_shard_gone_fails_its_samples_by_name_and_loses_nothing_else(s3_server: S3Server) -> None:
    source = dataset(300)
    url = upload(s3_server, source, to="shards", shard_size=60_000)
    expected = truth(source, strip_extension=True)
    with S3Storage(url, block_bytes=20_000, retry=QUICK, **s3_server.options()) as storage:
        gone = storage.shards[1].shard.name
        lost = {key for key, index in zip(storage.keys, range(len(storage))) if storage.sample_name(index).split("#")[0].endswith(gone)}
        bucket, prefix = url[len("s3://") :].split("/", 1)
        s3_server.client().delete_object(Bucket=bucket, Key=f"{prefix}/{gone}")

        raising = Loader(storage, batch_size=16, sampling=Sampling(shuffle="block", seed=2))
        with pytest.raises(SampleError, match=gone):
            for _ in raising:
                pass

        loader = Loader(
            storage,
            batch_size=16,
            sampling=Sampling(shuffle="block", seed=2),
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
        )
        delivered: Counter[str] = Counter()
        for batch in loader:
            for key, data, replaced, padding in zip(batch.keys, batch.data, batch.replaced, batch.padding):
                assert data == expected[key], "a replacement is real data, never the lost sample's"
                if not replaced and not padding:
                    delivered[key] += 1
        failed = {failure.sample for failure in loader.failures}
        assert lost and failed == lost, "each sample of the gone shard is reported, no other"
        assert all(gone in failure.error for failure in loader.failures), "the reason names the shard"
        assert delivered == Counter(set(expected) - lost), "every other sample once"


def test_a_failed_warm_up_request_is_reported_in_the_epoch_it_was_for(s3_server: S3Server) -> None:
    source = dataset(120)
    url = upload(s3_server, source)
    with S3Storage(url, retry=QUICK, **s3_server.options()) as storage:
        missing = storage.keys[0]  # unshuffled: the first sample of every epoch, so warmed each time
        bucket, prefix = url[len("s3://") :].split("/", 1)
        s3_server.client().delete_object(Bucket=bucket, Key=f"{prefix}/{missing}")
        loader = Loader(
            storage, batch_size=10, sampling=Sampling(shuffle="none"), failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None)
        )
        for _ in range(3):
            keys = [key for batch in loader for key, replaced in zip(batch.keys, batch.replaced) if not replaced]
            assert Counter(keys) == Counter(set(storage.keys) - {missing})
        assert loader._warmup is not None and loader._warmup.used > 0, "epochs 1 and 2 began from warmed requests"
        assert [(failure.sample, failure.epoch) for failure in loader.failures] == [(missing, 0), (missing, 1), (missing, 2)]


def test_closing_with_warm_up_requests_in_flight_leaves_no_thread(s3_server: S3Server) -> None:
    source = dataset(200)
    url = upload(s3_server, source, to="shards", shard_size=60_000)
    before = set(threading.enumerate())
    with LatencyProxy("127.0.0.1", s3_server.port, delay=0.3) as proxy:
        options = {**s3_server.options(), "endpoint": f"http://{proxy.address[0]}:{proxy.address[1]}"}
        with S3Storage(url, block_bytes=20_000, **options) as storage:
            loader = Loader(storage, batch_size=50, sampling=Sampling(shuffle="block", seed=1))
            batches = iter(loader)
            for _ in range(len(loader)):
                next(batches)  # the last batch is out: the next epoch's first ones are in flight
            assert loader._warmup is not None and loader._warmup.requested > 0
            batches.close()  # as a `break` out of the loop does
    deadline = time.monotonic() + 10
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(threading.enumerate()) - before, f"threads left: {set(threading.enumerate()) - before}"


def test_a_block_on_a_slow_connection_is_sent_again(s3_server: S3Server) -> None:
    source = dataset(300)
    url = upload(s3_server, source, to="shards", shard_size=60_000)
    expected = truth(source, strip_extension=True)
    # A quarter of the connections take a second each way: the blocks on them are sent again.
    with LatencyProxy("127.0.0.1", s3_server.port, delay=0.005, slow_fraction=0.25, slow_factor=200, seed=3) as proxy:
        options = {**s3_server.options(), "endpoint": f"http://{proxy.address[0]}:{proxy.address[1]}"}
        with S3Storage(url, block_bytes=8_000, **options) as storage:
            storage.stream_blocks()
            keys = list(storage.keys)
            assert storage.read_many(keys) == [expected[key] for key in keys]
            stats = storage.stats()
            blocks = storage.block_sizes()
            assert blocks is not None and 1 <= stats["block_copies_won"] <= stats["block_copies"] <= 0.1 * len(blocks) + 4


def test_exiting_with_requests_in_flight_and_the_storage_never_closed_is_clean(s3_server: S3Server) -> None:
    source = dataset(100)
    url = upload(s3_server, source, to="shards", shard_size=60_000)
    script = f"""
import asyncio, atexit, threading
from stoker.storage import S3Storage
# Registered first, so it runs last at exit: after the storage's own exit hook.
atexit.register(lambda: print("loop threads at exit:", sum(thread.name.startswith("stoker-net") for thread in threading.enumerate())))
storage = S3Storage({url!r}, block_bytes=20_000, endpoint={{endpoint!r}}, access_key_id={s3_server.access_key!r},
                    secret_access_key={s3_server.secret_key!r}, region={s3_server.region!r})
storage.stream_blocks()
pending = [asyncio.run_coroutine_threadsafe(storage.fetch_index(index), storage.event_loop()) for index in range(0, 100, 7)]
print("exiting with", sum(not request.done() for request in pending), "requests in flight", flush=True)
"""
    with LatencyProxy("127.0.0.1", s3_server.port, delay=0.5) as proxy:
        endpoint = f"http://{proxy.address[0]}:{proxy.address[1]}"
        finished = subprocess.run(
            [sys.executable, "-c", script.replace("{endpoint!r}", repr(endpoint))],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
    assert finished.returncode == 0, finished.stderr
    assert "requests in flight" in finished.stdout and "exiting with 0 " not in finished.stdout
    assert "loop threads at exit: 0" in finished.stdout, "the storage's loop was stopped before Python finalized"
    assert "Fatal Python error" not in finished.stderr and "Traceback" not in finished.stderr


def test_a_storage_closed_under_a_running_loader_stops_it_saying_so_and_leaves_no_thread(s3_server: S3Server) -> None:
    # Its samples were never read: not bad samples to skip, but the end of the run, said at once.
    url = upload(s3_server, dataset(300), to="shards", shard_size=60_000)
    before = set(threading.enumerate())
    storage = S3Storage(url, block_bytes=20_000, **s3_server.options())
    batches = iter(Loader(storage, batch_size=10, sampling=Sampling(shuffle="block", seed=1)))
    next(batches)  # running: blocks and look-ahead requests in flight
    storage.close()
    with pytest.raises(StorageClosedError, match="the storage was closed while"):
        for _ in batches:
            pass
    deadline = time.monotonic() + 10
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(threading.enumerate()) - before, f"threads left: {set(threading.enumerate()) - before}"
