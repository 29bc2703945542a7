"""The metrics endpoint: a real scrape over HTTP, names in Prometheus's conventions, counters that
keep growing across epochs, bad samples by stage and action, and a server that stops."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from stoker import Loader
from stoker.loader import FailurePolicy, Sampling
from stoker.observe import serve_metrics
from stoker.storage import MemoryStorage

parser = pytest.importorskip("prometheus_client.parser")


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(text)
        for sample in family.samples
    }


def bad_decode(data: bytes) -> bytes:
    if data == b"bad":
        raise ValueError("not a sample")
    return data


def test_a_scrape_reports_the_loader_across_epochs() -> None:
    samples = {f"k{index}": index.to_bytes(4, "little") for index in range(200)}
    samples["k7"] = b"bad"
    loader = Loader(
        MemoryStorage(samples),
        batch_size=10,
        decode=bad_decode,
        sampling=Sampling(rank=0, world_size=1),
        failure_policy=FailurePolicy(on_error="skip"),
    )
    with serve_metrics(loader, port=0) as server:
        assert server.url.startswith("http://127.0.0.1:")
        for _ in loader:  # one whole epoch
            pass
        first = scrape(server.url)
        rank = (("rank", "0"),)
        assert first[("stoker_batches_delivered_total", rank)] == 20
        assert first[("stoker_step", rank)] == 20
        assert first[("stoker_stage_items_total", (("rank", "0"), ("stage", "decode")))] == 20
        assert first[("stoker_bad_samples_total", (("action", "replaced"), ("rank", "0"), ("stage", "decode")))] == 1
        assert first[("stoker_run_seconds_total", rank)] >= first[("stoker_data_wait_seconds_total", rank)] > 0
        batches = iter(loader)  # the next epoch, under way
        for _ in range(5):
            next(batches)
        second = scrape(server.url)
        assert second[("stoker_batches_delivered_total", rank)] == 25, "counts go on across epochs"
        assert second[("stoker_stage_items_total", (("rank", "0"), ("stage", "decode")))] >= 25
        assert second[("stoker_stage_concurrency", (("rank", "0"), ("stage", "decode")))] >= 1
        batches.close()  # type: ignore[attr-defined]
        # The host's side, for a straggler's cause: its cores busy (every process) include its own CPU time.
        assert second[("stoker_cores", rank)] >= 1
        assert second[("stoker_process_cpu_seconds_total", rank)] > first[("stoker_process_cpu_seconds_total", rank)] - 1e-9
        if ("stoker_cores_busy_seconds_total", rank) in second:  # Linux
            assert second[("stoker_cores_busy_seconds_total", rank)] > 0
        assert second[("stoker_reads_from", (("rank", "0"), ("reads_from", "from MemoryStorage")))] == 1
        url = server.url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)
