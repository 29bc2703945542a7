"""The HTTP fuzz target's child process: for each case it is sent, opens a dataset on the hostile
server (`stoker_testbed.servers.hostile_http`) with the user's secret headers and reads every
sample, or fetches a page as `stoker top` does, in this process, so that a crash (an abort on a
declared length) takes down only this worker, never the test run.

Speaks `tests.faults.fuzz.worker`'s protocol: one JSON line per case,
``{"format": "objects" | "shards" | "mds" | "page" | "s3", "path": URL, "names": [...]}`` (for
``s3``, the first name is the S3 endpoint: the hostile server), one JSON line
back, ``{"outcome": "decoded" | "error", "type", "message", "named", "rss_mb", "failures"}``,
where ``named`` says whether the error is stoker's named one (a `StorageError`; for a page, the
`OSError` that `stoker top` shows) and names one of ``names``, and never shows a secret;
``failures`` are the messages of the samples that failed (each named: else the case fails).

    python -m tests.faults.fuzz.http_worker
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile

from stoker._bounded import fetch_page
from stoker.errors import StorageError
from stoker.storage import open_storage
from stoker.storage.policies import RetryPolicy

from .worker import _peak_rss_mb

SECRETS = {"X-Api-Key": "key-SECRET-1", "Authorization": "Bearer token-SECRET-2"}
"""The user's headers every case sends: they must reach the home origin only."""

TIMEOUT = 0.5
"""Each request's overall deadline (seconds): a trickle ends there."""

RETRY = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02, deadline=3.0, open_deadline=3.0)
"""An outage is tried twice, a busy server (429, 503) waited for 3 s: the suite judges the outcome,
not the patience."""


def _named(error: BaseException, names: list[str], kinds: tuple[type[BaseException], ...]) -> bool:
    message = str(error)
    return isinstance(error, kinds) and any(name in message for name in names) and "SECRET" not in message


def run(kind: str, url: str, names: list[str]) -> list[str]:
    """Open and read it all (or fetch the page); raise what stoker raises. Returns the messages
    of the samples that failed."""
    if kind == "page":
        fetch_page(url, timeout=TIMEOUT)
        return []
    if kind == "s3":  # signed requests (the keys are the test's own): no headers of the user's
        settings = {"endpoint": names[0], "access_key_id": "test-key", "secret_access_key": "test-SECRET-6", "region": "us-east-1"}
    else:
        settings = {"headers": SECRETS}
    storage = open_storage(url, timeout=TIMEOUT, connect_timeout=TIMEOUT, retry=RETRY, **settings)
    failures = []
    try:
        keys = list(storage.keys)
        for key, result in zip(keys, storage.try_read_indices(range(len(keys)))):
            if isinstance(result, Exception):
                if not _named(result, names, (StorageError,)):
                    raise AssertionError(f"sample {key!r} failed without a named error: {type(result).__name__}: {result}")
                failures.append(f"{type(result).__name__}: {result}"[:2000])
    finally:
        storage.close()
    return failures


def main() -> None:
    logging.getLogger("stoker").addHandler(logging.NullHandler())
    logging.getLogger("stoker").propagate = False
    os.environ["STOKER_CACHE"] = tempfile.mkdtemp(prefix="stoker-http-fuzz-cache-")
    for line in sys.stdin:
        case = json.loads(line)
        kind, names = case["format"], case["names"]
        answer: dict[str, object]
        try:
            answer = {"outcome": "decoded", "failures": run(kind, case["path"], names)}
        except AssertionError as error:
            answer = {"outcome": "error", "type": "unnamed sample failure", "message": str(error)[:2000], "named": False}
        except Exception as error:  # judged by the parent: the type and whether it names the URL
            kinds = (OSError,) if kind == "page" else (StorageError,)
            answer = {"outcome": "error", "type": type(error).__name__, "message": str(error)[:2000], "named": _named(error, names, kinds)}
        answer["rss_mb"] = _peak_rss_mb()
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
