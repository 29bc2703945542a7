"""Live metrics: a Loader's figures on a Prometheus endpoint, off by default, one line to turn on.

``serve_metrics(loader, port=9464)`` starts prometheus_client's HTTP server on its own registry;
each scrape reads the Loader's public `LiveSnapshot` then (no thread of ours, nothing sampled between scrapes).
Names follow Prometheus's conventions: a ``stoker_`` prefix, units in the name, ``_total`` on
counters, which count from the start of the run (finished epochs plus the running one), so
``rate()`` works across epochs:

- ``stoker_batches_delivered_total``, ``stoker_run_seconds_total`` and
  ``stoker_data_wait_seconds_total``: ``rate(wait) / rate(run)`` is the data-wait share;
- ``stoker_stage_items_total``, ``stoker_stage_busy_seconds_total`` (task-seconds: over time and
  concurrency, how busy a stage is), ``stoker_stage_failures_total``, by ``stage``;
- gauges ``stoker_stage_concurrency``, ``stoker_stage_queue_items`` and
  ``stoker_stage_queue_capacity``, by ``stage``;
- ``stoker_bad_samples_total`` by ``stage`` and ``action``; ``stoker_tuning_moves_total`` by
  ``knob``; ``stoker_step`` (the rank's batch number);
- the host's side, for a straggler's cause: ``stoker_cores_busy_seconds_total`` (the cores this
  rank may run on, busy with any process), ``stoker_process_cpu_seconds_total``, the gauge
  ``stoker_cores``, and ``stoker_reads_from`` (1, labelled with where the reads go).

Every series carries the rank as a label, so ranks on one host can share a scrape config.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from ..errors import ConfigurationError
from ._host_cpu import cores_busy_seconds, process_cpu_seconds, reads_from, usable_cores
from ._snapshot import LiveSnapshot, Snapshotting

__all__ = ["MetricsServer", "serve_metrics"]


def _collector(loader: Snapshotting) -> Any:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    where = reads_from(loader)

    class LoaderCollector:
        def collect(self) -> Iterator[Any]:
            snapshot: LiveSnapshot = loader.snapshot()
            rank, totals, running, stages = str(snapshot.rank), snapshot.totals, snapshot.running, snapshot.stages

            def counter(name: str, help_text: str, value: float) -> Any:
                family = CounterMetricFamily(name, help_text, labels=["rank"])
                family.add_metric([rank], value)
                return family

            yield counter(
                "stoker_batches_delivered", "Batches the Loader delivered.", totals.batches + (running.items_consumed if running else 0)
            )
            yield counter("stoker_run_seconds", "Seconds the Loader's epochs ran.", snapshot.run_seconds)
            yield counter("stoker_data_wait_seconds", "Seconds the training loop waited for data.", snapshot.wait_seconds)
            items = CounterMetricFamily("stoker_stage_items", "Items a stage put out.", labels=["rank", "stage"])
            busy = CounterMetricFamily("stoker_stage_busy_seconds", "Task-seconds a stage ran.", labels=["rank", "stage"])
            failures = CounterMetricFamily("stoker_stage_failures", "Items a stage failed on.", labels=["rank", "stage"])
            concurrency = GaugeMetricFamily("stoker_stage_concurrency", "Tasks a stage may run at once now.", labels=["rank", "stage"])
            queue = GaugeMetricFamily("stoker_stage_queue_items", "Finished items in a stage's output queue now.", labels=["rank", "stage"])
            capacity = GaugeMetricFamily(
                "stoker_stage_queue_capacity", "Items a stage's output queue holds at most.", labels=["rank", "stage"]
            )
            stage_totals = snapshot.stage_totals()
            for stage in stages:
                now = [stage] if running is not None else []
                labels = [rank, stage.name]
                items.add_metric(labels, stage_totals[stage.name][0])
                busy.add_metric(labels, stage_totals[stage.name][1])
                failures.add_metric(labels, totals.stage_failures[stage.name] + sum(each.failures for each in now))
                concurrency.add_metric(labels, stage.concurrency)
                queue.add_metric(labels, stage.queue_length)
                capacity.add_metric(labels, stage.queue_capacity)
            yield from (items, busy, failures, concurrency, queue, capacity)
            bad = CounterMetricFamily("stoker_bad_samples", "Bad samples, by stage and what was done.", labels=["rank", "stage", "action"])
            for kind, count in snapshot.bad_samples.items():
                stage_name, _, action = kind.partition(": ")
                bad.add_metric([rank, stage_name, action], count)
            yield bad
            moves = CounterMetricFamily("stoker_tuning_moves", "Moves of the live tuner, by knob.", labels=["rank", "knob"])
            for knob, count in snapshot.tuning_moves.items():
                moves.add_metric([rank, knob], count)
            yield moves
            step = GaugeMetricFamily("stoker_step", "The rank's batch number since the run began.", labels=["rank"])
            step.add_metric([rank], snapshot.step)
            yield step
            # The host's side, for a straggler's cause (`stoker top`): the cores this rank may run
            # on, how busy they were (every process), its own CPU time; where its reads go.
            cores_busy = cores_busy_seconds()
            if cores_busy is not None:
                yield counter("stoker_cores_busy_seconds", "Seconds the cores this rank may run on were busy, all processes.", cores_busy)
            yield counter("stoker_process_cpu_seconds", "CPU seconds this rank's process used.", process_cpu_seconds())
            cores = GaugeMetricFamily("stoker_cores", "Cores this rank may run on (its affinity).", labels=["rank"])
            cores.add_metric([rank], usable_cores())
            yield cores
            if where:
                info = GaugeMetricFamily("stoker_reads_from", "Where this rank's storage reads go (1).", labels=["rank", "reads_from"])
                info.add_metric([rank, where], 1)
                yield info

    return LoaderCollector()


class MetricsServer:
    """A running metrics endpoint (`serve_metrics`); `close` stops it.

    Attributes:
        port: The port it listens on (the one chosen, with ``port=0``).
        url: ``http://ADDRESS:PORT/metrics``.
    """

    def __init__(self, server: Any, thread: threading.Thread, address: str) -> None:
        self._server, self._thread = server, thread
        self.port = int(server.server_address[1])
        self.url = f"http://{address}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and join the server's thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve_metrics(loader: Snapshotting, port: int = 9464, address: str = "127.0.0.1") -> MetricsServer:
    """Serve ``loader``'s figures for Prometheus at ``http://ADDRESS:PORT/metrics`` (see the
    module notes for the names).

    Args:
        loader: The Loader to report on (anything with a `snapshot` method returning a
            `LiveSnapshot`; each scrape calls it once).
        port: The port (0: any free one; `MetricsServer.port` says which).
        address: Where to listen; loopback by default (give ``"0.0.0.0"`` for a scraper on
            another host).

    Returns:
        The running server; ``close()`` it, or use it as a context manager.

    Raises:
        ConfigurationError: prometheus_client is not installed (``pip install 'stoker[metrics]'``).
        OSError: The address or port cannot be listened on (in use, not this host's).
    """
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as error:
        raise ConfigurationError("live metrics are served with prometheus_client: pip install 'stoker[metrics]'") from error
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_collector(loader))
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as error:
        raise OSError(error.errno, f"cannot serve metrics on {address}:{port}: {error.strerror or error}") from error
    return MetricsServer(server, thread, address)
