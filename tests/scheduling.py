"""Where each test runs in `make test`: side by side with others, or alone.

`make test` runs the suite in two parts (Makefile, ``python-test``):

1. every test not marked ``serial``, on several pytest-xdist workers at once (``-n``, ``--dist
   loadgroup``). Most tests wait far more than they compute: on a server, a child process, a
   network namespace, a sleep, a kill; several of them share the two cores well.
2. the tests marked ``serial``, one after another in one process, with nothing else running:
   the ones that time what they check (a tuner's moves, a straggler's verdict, a prefetch ramp),
   that use the whole machine's network (the hosts' namespaces), or that take both cores for long.

`run_alone` says which tests are serial, and why; `worker_group` keeps the tests that share an
expensive server (Cassandra, the Ray cluster) on one worker, so it starts once, not once a worker.
A plain ``pytest`` (no ``-n``) runs everything in one process, as before; the markers change nothing there.

Adding a test: if it waits, nothing to do. If it measures time or rates to decide what it
asserts, or keeps both cores busy for more than a few seconds, add it to `_ALONE` with the reason
(docs/contributing.md, "Keeping the suite fast").
"""

from __future__ import annotations

import pytest

__all__ = ["run_alone", "worker_group"]

# Test id prefixes (path, then ``::name`` where a file holds both kinds) that run alone, and why.
_ALONE: dict[str, str] = {
    "tests/hosts/": "network namespaces: one set of hosts on this machine at a time, and their jobs time partitions and losses",
    # Three JVMs starting at once take both cores for a minute or two; beside three busy workers
    # the third node was not serving after 300 s (CI, 2 December), and alone they start in about 90 s.
    "tests/storage/remote/test_cassandra_cluster.py::test_a_node_killed": "a 3-node Cassandra cluster: three JVMs starting at once",
    # make test builds that wheel beside the side-by-side part (packaging/beside.sh), not before it.
    "tests/packaging/test_free_threaded_wheel.py": "it installs the free-threaded wheel, built while the side-by-side part runs",
    "tests/bench/test_benchmarks_run.py::test_a_cheap_benchmark_runs_to_its_table[loader/free_threaded.py]": (
        "it runs .venv-freethreaded, which make test installs while the side-by-side part runs"
    ),
    # The tuner's moves and measured rates follow the machine's load. On a free-threaded build the
    # side-by-side workers' own Python threads run in parallel (no GIL takes turns) and fill both
    # cores: two tuner cases side by side on 3.14t read that load as the job's own and moved
    # otherwise ("spin used 0.0 of 4 slots" where alone it sees "other processes keep 1.2 of 2
    # cores busy"). On the GIL build make test runs the static checks beside the side-by-side part
    # (packaging/beside.sh), filling the cores the tests leave: a clean run there trimmed an I/O
    # stage the tuner should have raised ("wait used 7.1 of 10 slots": 7 threads, 8 asked for).
    "tests/pipeline/test_tuner.py": "the tuner's moves follow the machine's load, which the work beside the tests fills",
    # 8 sleeping threads measured at 274 items/s against one thread's 277 side by side on 3.14t
    "tests/pipeline/test_profile.py": "it compares the rates it measures, which work beside it slows unevenly",
    # a consumer that only sorts was kept off the cores long enough that the stage before it waited 0.62 s on it
    "tests/pipeline/test_stats.py": "it compares the waits it measures, which work beside it lengthens unevenly",
}

# Fixtures that start a server too heavy to start once per worker (Cassandra: about a minute and
# a GB; the Ray cluster: a dozen processes), and files whose own module fixtures start one. They
# share one group, so one worker runs them one after another: a 3-node Cassandra starting beside
# a Ray cluster and a second Cassandra took both cores, and neither came up in time.
_HEAVY = "heavy-servers"
_SHARED_SERVERS: dict[str, str] = {
    "cassandra_server": _HEAVY,
    "keyspace_connection": _HEAVY,
    "ray_cluster": _HEAVY,
}
_SHARED_SERVER_FILES: dict[str, str] = {
    "tests/faults/storage/test_upload_faults.py": _HEAVY,
    # Its restart test starts a Cassandra of its own: beside the shared one, two JVMs took both
    # cores for a minute and the other workers' tests timed out.
    "tests/storage/remote/test_cassandra.py": _HEAVY,
    "tests/ray/": _HEAVY,
    "tests/faults/runs/test_ray_": _HEAVY,
}


# Files whose module fixture starts a heavy server for some of its parameters only: those cases
# join the group, the others (S3, GCS and Azure emulators: one process each, mostly waiting out an
# outage) run side by side. In one group the outage file's cases alone kept that worker busy for
# ten of the part's twenty-four minutes.
_SHARED_SERVER_CASES: dict[str, tuple[str, str]] = {
    "tests/faults/storage/test_storage_outage.py": ("[cassandra]", _HEAVY),
}


def _test_id(item: pytest.Item) -> str:
    return item.nodeid.replace("\\", "/")


def run_alone(item: pytest.Item) -> str | None:
    """Why ``item`` runs alone in `make test`'s second part, or None when it runs side by side."""
    test = _test_id(item)
    return next((why for prefix, why in _ALONE.items() if test.startswith(prefix)), None)


def worker_group(item: pytest.Item) -> str | None:
    """The worker group of ``item`` in a parallel run (its shared server's name), or None."""
    fixtures = getattr(item, "fixturenames", ())
    for fixture, group in _SHARED_SERVERS.items():
        if fixture in fixtures:
            return group
    test = _test_id(item)
    for file, (case, group) in _SHARED_SERVER_CASES.items():
        if test.startswith(file):
            return group if case in test else None
    return next((group for prefix, group in _SHARED_SERVER_FILES.items() if test.startswith(prefix)), None)
