"""What the hostile HTTP server answers in a fuzz case, drawn by Hypothesis: which request of a
dataset's reads is answered how (status lines, ``Content-Length`` huge, negative, doubled or
wrong, ``Content-Range`` for other bytes, chunked pieces that lie or trickle, redirects in loops,
in chains, across origins and to signed URLs, encoded bodies, garbage, bodies cut short, grown,
endless). A plan is plain JSON, so a failing one is saved and replayed as a regression.
"""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from stoker_testbed.servers.hostile_http import Answer, HostileHttpServer

STATUSES = [
    b"200 OK",
    b"206 Partial Content",
    b"301 Moved Permanently",
    b"302 Found",
    b"303 See Other",
    b"307 Temporary Redirect",
    b"308 Permanent Redirect",
    b"304 Not Modified",
    b"400 Bad Request",
    b"401 Unauthorized",
    b"403 Forbidden",
    b"404 Not Found",
    b"416 Range Not Satisfiable",
    b"429 Too Many Requests",
    b"500 Internal Server Error",
    b"503 Service Unavailable",
    b"999 Odd",
    b"2x0 OK",
    b"",
    b"200 \x1b]0;title\x07\x1b[2J",
]
LENGTHS = ["1000000000000", "-1", "18446744073709551617", "abc", "0", " 12", "99999999999999999999999999"]
RANGES = ["bytes 0-999999999999/1000000000000", "bytes */5", "bytes 5-2/10", "bytes 0-0/1", "garbage"]
LOCATIONS = [
    "{other}/{path}",
    "{other_host}/{path}",
    "/{path}",
    "{home}/{path}",
    "{other}/{path}?X-Amz-Signature=QUERY-SECRET-3",
    "ftp://127.0.0.1/{path}",
    "",
    "http://[::1",
    "http://user:pw-SECRET-4@127.0.0.1:1/{path}",
    "https://127.0.0.1:1/{path}",
    "//127.0.0.1:1/{path}",
]


def _lie_in_chunks(body: bytes, sizes: list[int]) -> bytes:
    """``body`` in chunked encoding, each chunk declaring ``sizes`` (which may lie)."""
    out, start = b"", 0
    for size in sizes:
        piece = body[start : start + max(size, 0)]
        start += len(piece)
        out += f"{size:X}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def _sometimes(draw: st.DrawFn) -> bool:
    """True one time in four."""
    return draw(st.integers(0, 3)) == 0


@st.composite
def answers(draw: st.DrawFn, path: str, honest: bytes, redirects: bool = True) -> dict[str, Any]:
    """One hostile answer to a request for ``path`` (whose honest body is ``honest``); with a
    ``Location`` only where ``redirects``."""
    # An answer that looks like data half the time: what follows it is what is judged.
    status = draw(st.one_of(st.just(b"200 OK"), st.just(b"200 OK"), st.sampled_from(STATUSES), st.binary(max_size=12)))
    body = draw(
        st.sampled_from(["honest", "cut", "grown", "empty", "large"]).map(
            lambda kind: {
                "honest": honest,
                "cut": honest[: len(honest) // 2],
                "grown": honest + b"x" * 100,
                "empty": b"",
                "large": honest + bytes(300_000),
            }[kind]
        )
        | st.binary(max_size=2000)
    )
    headers: list[tuple[str, str]] = []
    length = draw(st.none() | st.just("honest") | st.just("1000000000000") | st.sampled_from(LENGTHS) | st.integers(0, 10**13).map(str))
    if length is not None:
        headers.append(("Content-Length", str(len(body)) if length == "honest" else length))
        if _sometimes(draw):
            headers.append(("Content-Length", draw(st.sampled_from(LENGTHS))))
    content_range = draw(st.none() | st.just("honest") | st.sampled_from(RANGES))
    if content_range is not None:
        headers.append(("Content-Range", f"bytes 0-{max(len(body) - 1, 0)}/{len(honest)}" if content_range == "honest" else content_range))
    location = draw(st.none() | st.sampled_from(LOCATIONS)) if redirects else None
    if location is not None:
        headers.append(("Location", location.replace("{path}", path)))
    if _sometimes(draw):
        headers.append(("Content-Encoding", draw(st.sampled_from(["gzip", "br", "identity"]))))
    if _sometimes(draw):
        headers.append(("X-Junk", draw(st.text(alphabet=st.characters(codec="latin-1"), max_size=20))))
    if _sometimes(draw) and length is None:
        headers.append(("Transfer-Encoding", "chunked"))
        sizes = draw(st.lists(st.integers(-1, 2**64) | st.integers(0, 300), min_size=1, max_size=4))
        body = _lie_in_chunks(body, sizes)
    # All at once; in two pieces a client reads one after the other; a trickle.
    halves = max(1, (len(body) + 1) // 2)
    trickle = draw(st.sampled_from([(0, 0.0)] * 4 + [(halves, 0.01)] * 2 + [(1, 0.05), (64, 0.3)]))
    return {
        "status": base64.b64encode(status).decode(),
        "headers": headers,
        "body": base64.b64encode(body).decode(),
        "piece": trickle[0],
        "pause": trickle[1],
        "endless": draw(st.sampled_from([False] * 9 + [True])),
        "body_on_head": draw(st.sampled_from([False] * 5 + [True])),
        "times": draw(st.sampled_from([1, 1, None])),
    }


@st.composite
def chains(draw: st.DrawFn, path: str) -> list[dict[str, Any]]:
    """``path`` on the home origin redirected through ``/hop/1``, ``/hop/2``... on any origin,
    then to ``path`` on another origin (with a signed URL's query), or back to a hop (a loop):
    one plan entry per hop."""
    hops = draw(st.integers(1, 7))
    origins = draw(st.lists(st.sampled_from(["{home}", "{other}", "{other_host}"]), min_size=hops, max_size=hops))
    loop = draw(st.none() | st.integers(1, hops))
    entries = []
    for number in range(hops):
        if number < hops - 1:
            target = f"{origins[number + 1]}/hop/{number + 1}"
        elif loop is not None:
            target = f"{origins[loop - 1]}/hop/{loop - 1}" if loop > 1 else "{home}/" + path
        else:
            target = draw(st.sampled_from(["{other}", "{other_host}"])) + f"/{path}?signed=QUERY-SECRET-5"
        status = draw(
            st.sampled_from(
                [b"301 Moved Permanently", b"302 Found", b"303 See Other", b"307 Temporary Redirect", b"308 Permanent Redirect"]
            )
        )
        entries.append(
            {
                "path": path if number == 0 else f"hop/{number}",
                "origin": "home" if number == 0 else None,
                "method": None,
                "answer": {
                    "status": base64.b64encode(status).decode(),
                    "headers": [("Location", target), ("Content-Length", "0")],
                    "body": "",
                },
            }
        )
    return entries


@st.composite
def plans(draw: st.DrawFn, targets: dict[str, bytes], redirects: bool = True) -> list[dict[str, Any]]:
    """A case's plan: one to three of the dataset's requests answered with hostile answers or
    redirect chains (the other requests are answered honestly); no redirect unless
    ``redirects``."""
    chosen = draw(st.lists(st.sampled_from(sorted(targets)), min_size=1, max_size=3, unique=True))
    plan: list[dict[str, Any]] = []
    for path in chosen:
        if redirects and draw(st.integers(0, 3)) == 0:
            plan.extend(draw(chains(path)))
        else:
            method = draw(st.sampled_from([None, "GET", "HEAD"]))
            plan.append({"path": path, "method": method, "answer": draw(answers(path, targets[path], redirects))})
    return plan


def declared_huge(path: str) -> list[dict[str, Any]]:
    """The plan of the worst finding: ``path`` answered ``200`` with ``Content-Length:
    1000000000000`` and a body that comes in two pieces (a client that sizes its buffer by the
    declared length allocates a terabyte when the second piece arrives)."""
    body = bytes(128 << 10)
    answer = {
        "status": base64.b64encode(b"200 OK").decode(),
        "headers": [("Content-Length", "1000000000000")],
        "body": base64.b64encode(body).decode(),
        "piece": len(body) // 2,
        "pause": 0.05,
    }
    return [{"path": path, "method": "GET", "answer": answer}]


def install(server: HostileHttpServer, plan: list[dict[str, Any]]) -> None:
    """Script ``server`` with ``plan`` (after a reset)."""
    server.reset()
    for entry in plan:
        answer = entry["answer"]
        server.answer(
            entry["path"],
            Answer(
                status=base64.b64decode(answer["status"]),
                headers=tuple((name, value) for name, value in answer["headers"]),
                body=base64.b64decode(answer["body"]),
                piece=answer.get("piece", 0),
                pause=answer.get("pause", 0.0),
                endless=answer.get("endless", False),
                body_on_head=answer.get("body_on_head", False),
                times=answer.get("times"),
            ),
            method=entry["method"],
            origin=entry.get("origin"),
        )
