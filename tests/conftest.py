"""Shared fixtures: every test must leave no stoker thread behind."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stoker_testbed.servers.azurite_server import AzuriteServer
from stoker_testbed.servers.buckets import TestBucket, new_bucket
from stoker_testbed.servers.gcs_server import GcsServer
from stoker_testbed.servers.s3_server import S3Server
from tests.scheduling import run_alone, worker_group

# A shell that starts a command in the background (`cmd &` without job control) has it ignore
# SIGINT, and Python then leaves SIGINT ignored: Ctrl-C would do nothing, in this process and in
# every child it starts. The tests of Ctrl-C need it to be Ctrl-C, however the suite was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def signal_handlers_kept() -> Iterator[None]:
    """Fail a test that leaves SIGINT or SIGTERM handled otherwise than it found them (a library
    that installs its own and keeps it, as LitData's ``optimize`` does with one that calls
    ``os._exit(0)``, would end a later test's Ctrl-C, and the whole run, silently)."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = [signal.Signals(number).name for number, handler in before.items() if signal.getsignal(number) is not handler]
    for number, handler in before.items():
        signal.signal(number, handler)
    if changed:
        pytest.fail(f"the test left {', '.join(changed)} with another handler (put back now)")


_WORKER_CACHE = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """In a parallel run (pytest-xdist), give each worker a cache folder of its own, where a test
    did not choose one: two workers' tests must not share listings, indexes or node caches."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is not None and "STOKER_CACHE" not in os.environ:
        os.environ["STOKER_CACHE"] = config.stash[_WORKER_CACHE] = tempfile.mkdtemp(prefix=f"stoker-cache-{worker}-")


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_WORKER_CACHE, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that run alone (`run_alone`), put the tests that share an expensive server
    on one worker of a parallel run (`worker_group`), and run the tests on the session's Ray
    cluster last, one after another: the cluster (a dozen processes, this one connected to it)
    starts with the first of them and, started by tests/faults, kept about 15% of a core busy for
    the rest of the run, slowing every test after it and loading the ones that time things."""
    for item in items:
        reason = run_alone(item)
        if reason is not None:
            item.add_marker(pytest.mark.serial(reason=reason))
        group = worker_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: "ray_cluster" in getattr(item, "fixturenames", ()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_CPU_AT_START] = _cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Record the CPU a test took (this process's, and that of the child processes it ended and
    reaped; a session's servers count at the session's end) as the ``cpu_seconds`` property of
    its JUnit record: on two cores CPU, not waiting, is what lengthens a parallel run, and
    `packaging/slowest_tests.py` lists the tests that took the most."""
    try:
        return (yield)
    finally:
        started = item.stash.get(_CPU_AT_START, None)
        if started is not None:
            item.user_properties.append(("cpu_seconds", f"{_cpu_seconds() - started:.1f}"))


_CPU_AT_START = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Say the run ended through pytest: a test that ends the process itself (``os._exit(0)``)
    would otherwise pass for a green run (the Makefile checks for this file)."""
    marker = os.environ.get("STOKER_TEST_RUN_MARKER")
    if marker and not hasattr(session.config, "workerinput"):  # a parallel run's own end, not a worker's
        with open(marker, "w") as file:
            file.write(f"{exitstatus}\n")


def stoker_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("stoker-")]


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves pipeline threads running after it returns."""
    before = set(stoker_threads())
    yield
    leaked = _threads_left(before, seconds=0.5)
    if leaked:
        # A pipeline dropped inside the test in a reference cycle is stopped by its finalizer:
        # give the collector a turn. Only then: late in a run this process holds torch, jax,
        # Ray and the rest, and a full collection took seconds, at every test's end.
        import gc

        gc.collect()
        leaked = _threads_left(before, seconds=5)
    if leaked:
        pytest.fail(f"threads left running: {[thread.name for thread in leaked]}")


def _threads_left(before: set[threading.Thread], seconds: float) -> list[threading.Thread]:
    """Stoker threads not in ``before`` still running after up to ``seconds`` (none: at once)."""
    deadline = time.monotonic() + seconds
    while True:
        leaked = [thread for thread in stoker_threads() if thread not in before]
        if not leaked or time.monotonic() >= deadline:
            return leaked
        time.sleep(0.02)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One s3proxy on loopback for the whole session (tests/storage/remote and tests/faults); without
    java it skips, and fails where ``STOKER_REQUIRE_SERVERS`` is set (CI)."""
    from stoker_testbed.availability import started

    server = started(S3Server(), "the S3 test server (s3proxy, needs java)")
    yield server
    server.close()


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GcsServer]:
    """One fake-gcs-server (Google Cloud Storage's emulator, built with go) for the session."""
    from stoker_testbed.availability import started

    server = started(GcsServer(), "the GCS test server (fake-gcs-server, built with go)")
    yield server
    server.close()


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[AzuriteServer]:
    """One Azurite (Azure Blob Storage's emulator, from npm) for the session."""
    from stoker_testbed.availability import started

    server = started(AzuriteServer(), "the Azure test server (Azurite, needs node and npm)")
    yield server
    server.close()


@pytest.fixture(params=["s3", "gs", "az"])
def object_bucket(request: pytest.FixtureRequest) -> TestBucket:
    """A fresh bucket on each object store's test server in turn: S3, GCS, Azure."""
    server = request.getfixturevalue({"s3": "s3_server", "gs": "gcs_server", "az": "azurite_server"}[request.param])
    return new_bucket(request.param, server)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """One local two-node Ray cluster for the whole session (tests/ray and tests/faults),
    this process connected to it; yields its address."""
    pytest.importorskip("ray")
    from stoker_testbed.servers.ray_cluster import local_ray_cluster

    # A short folder of its own: Ray's sockets live under it, and a Unix socket's path holds at
    # most 107 bytes (a pytest-xdist worker's temp folder, .../popen-gw0/ray0/session_.../sockets/
    # plasma_store.1, is past that, and the second node never started).
    folder = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    try:
        with local_ray_cluster(folder) as address:
            yield address
    finally:
        shutil.rmtree(folder, ignore_errors=True)
