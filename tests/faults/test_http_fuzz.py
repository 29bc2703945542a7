"""The HTTP fuzz target: a hostile server on loopback (`stoker_testbed.servers.hostile_http`),
driven by Hypothesis (``tests/faults/fuzz/http_plans.py``), answers some of a dataset's requests
with status lines, headers and bodies no honest server sends; a child process
(``tests/faults/fuzz/http_worker.py``) opens the dataset with the user's secret headers and reads
every sample, or fetches a page as `stoker top` does.

A case passes when it ends in data or in stoker's named error (a `StorageError` naming the URL;
for a page the `OSError` that `stoker top` shows) without a secret in its message, within
`CASE_TIMEOUT` (no hang), under `MAX_RSS_MB` (nothing allocated from a declared length), and no
request that reached another origin (another port, another host name) carried a header the user
supplied. Datasets on a web server (`HTTPStorage`): one object per sample (HEAD, GET), a tar
shard with its sidecar (HEAD, GET, ranged GETs), an MDS shard compressed with zstd (``index.json``,
the whole file); a page (`stoker top`'s fetch); and one object per sample on an S3 endpoint
(`S3Storage` through obstore: its manifest and objects by whole GETs). The S3 cases send no
redirect: obstore's client (reqwest) follows them itself, and carries the request's signature to
another origin after a second hop there (see `test_http_faults.py`): stoker cannot stop that
until object_store takes a redirect policy.

Budget: ``STOKER_FUZZ_EXAMPLES`` / 2 cases per dataset (30 by default: 150 cases, about half a
minute on a 2-core machine); a failing plan is saved under
``tests/faults/fuzz/regressions/http/`` and replayed from then on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings

from stoker_testbed.servers.hostile_http import HostileHttpServer

from .fuzz.http_datasets import datasets, publish
from .fuzz.http_plans import declared_huge, install, plans
from .fuzz.http_worker import SECRETS
from .test_fuzz import EXAMPLES, FRESH, ROOT, Worker, _verdict

REGRESSIONS = Path(__file__).resolve().parent / "fuzz" / "regressions" / "http"
CASES = max(1, EXAMPLES // 2)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileHttpServer]:
    """The hostile server, holding each dataset's honest files."""
    with HostileHttpServer() as hostile:
        publish(hostile, tmp_path_factory.mktemp("http-fuzz"))
        yield hostile


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    started = Worker("tests.faults.fuzz.http_worker")
    yield started
    started.close()


def _leak(server: HostileHttpServer) -> str | None:
    """Why the case leaked a header the user supplied to another origin, or None."""
    for request in server.requests_to_other_origins():
        for name, value in SECRETS.items():
            if value in request.headers.values() or name.lower() in request.headers:
                return f"the user's {name} header reached the {request.origin} origin ({request.method} {request.target})"
    return None


def _judge(layout: str, plan: list[dict[str, Any]], server: HostileHttpServer, worker: Worker) -> str | None:
    url, names, _ = datasets(server)[layout]
    install(server, plan)
    answer = worker.run(layout, url, names)
    return _verdict(answer) or _leak(server)


def _save(layout: str, plan: list[dict[str, Any]], reason: str) -> Path:
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    # One file per kind of failure, overwritten while Hypothesis shrinks: the last is the smallest.
    signature = hashlib.sha256(f"{layout}:{reason.split(':')[0]}".encode()).hexdigest()[:12]
    path = REGRESSIONS / f"{layout}-{signature}.json"
    path.write_text(json.dumps({"layout": layout, "reason": reason[:500], "plan": plan}, indent=1))
    return path


@pytest.mark.parametrize("layout", ["objects", "shards", "mds", "page", "s3"])
def test_hostile_answers_end_in_data_or_a_named_error(layout: str, server: HostileHttpServer, worker: Worker) -> None:
    assert _judge(layout, [], server, worker) is None, "the honest server's dataset itself fails"
    *_, targets = datasets(server)[layout]

    @settings(max_examples=CASES, deadline=None, derandomize=not FRESH, database=None, suppress_health_check=list(HealthCheck))
    @given(plan=plans(targets, redirects=layout != "s3"))
    def check(plan: list[dict[str, Any]]) -> None:
        reason = _judge(layout, plan, server, worker)
        if reason is not None:
            saved = _save(layout, plan, reason)
            raise AssertionError(f"{layout}: {reason} (saved as {saved.relative_to(ROOT)})")

    for path in targets:  # the worst finding, on every request, in every run: besides the drawn cases
        check = example(plan=declared_huge(path))(check)
    check()


def _saved() -> list[Path]:
    return sorted(REGRESSIONS.glob("*.json")) if REGRESSIONS.exists() else []


@pytest.mark.parametrize("path", _saved(), ids=lambda path: path.name)
def test_saved_http_regressions_stay_fixed(path: Path, server: HostileHttpServer, worker: Worker) -> None:
    saved = json.loads(path.read_text())
    assert _judge(saved["layout"], saved["plan"], server, worker) is None
