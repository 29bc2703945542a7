"""How S3 errors are sorted into final, retried and server-busy ones."""

from __future__ import annotations

import pytest

pytest.importorskip("obstore")

from obstore import exceptions  # noqa: E402

from stoker.storage.remote._s3_client import classify_s3_error  # noqa: E402


@pytest.mark.parametrize(
    "error, kind",
    [
        (exceptions.NotFoundError("Object at location d/x.jpg not found"), "fatal"),
        (exceptions.PermissionDeniedError("403 Forbidden"), "fatal"),
        (exceptions.GenericError("Server returned non-2xx status code: 503 Service Unavailable: <Code>SlowDown</Code>"), "overload"),
        (exceptions.GenericError("HTTP status client error (429 Too Many Requests) for url (http://127.0.0.1:9000/b/k)"), "overload"),
        # A 429 in a port or a timing is not the status: a refused connection is retried.
        (exceptions.GenericError("Error performing GET http://127.0.0.1:54290/b/k in 14.29ms - error sending request"), "retry"),
        (ConnectionResetError("connection reset by peer"), "retry"),
    ],
)
def test_errors_are_sorted_by_what_they_say(error: BaseException, kind: str) -> None:
    assert classify_s3_error(error) == kind
