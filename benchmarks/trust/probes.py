"""Hostile-input probes of issue 72 ("Trust, round 4"), one per finding, plus a few beyond its list:
each runs in a child process of its own (its address space capped, a timeout), and the table
reports its outcome, wall time and the child's peak RSS (its VmHWM; a tool it starts not counted).

An outcome is ``ok: ...`` (the correct result), ``wrong: ...`` (a silent wrong result, a header
sent to another origin, a victim file lost), the exception raised (its type, and its message's
first line), ``signal N`` or ``hang (killed at T s)``. The verdict: ``held`` for a correct result
or an error of stoker's own family; ``FAILS`` for a signal, a hang, a wrong result, an exception
of Python's or a library's own (a raw error), or a named error where a correct result exists;
``n/a`` where the API did not exist (an ImportError in the child).

Servers listen on 127.0.0.1 only, in this process (the testbed's hostile HTTP server); the clients
under test run in the children. ``--python`` and ``--path`` run the children with another build:
the table of issue 72's closing note compares main with the commit before its work
(``--compare PYTHON PYTHONPATH`` adds that column).

Run:  python benchmarks/trust/probes.py [--quick] [--only NAME,...] [--json FILE] [--compare PYTHON PYTHONPATH]
e.g.  python benchmarks/trust/probes.py --compare /tmp/ci-base/.venv/bin/python /tmp/ci-base/python:/tmp/ci-base/testbed
      python benchmarks/trust/probes.py --tables before.json after.json   (tables of earlier runs, side by side)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TERABYTE = ("Content-Length", "1000000000000")
HUGE = {"headers": (TERABYTE,), "body": bytes(128 << 10), "piece": 64 << 10, "pause": 0.05}
"""A declared terabyte and a body in two pieces: a client that sizes its buffer by the declared
length allocates it when the second piece arrives (one piece alone is returned as it is)."""
PRELUDE = """
import json, os, subprocess, sys
from pathlib import Path
work = Path(os.environ["PROBE_WORK"]); home = os.environ.get("PROBE_HOME", "")
os.environ["STOKER_CACHE"] = str(work / "stoker-cache")
SECRETS = {"X-Api-Key": "key-SECRET-1", "Authorization": "Bearer token-SECRET-2"}  # the user's headers
DEEP = b"[" * 100_000 + b"]" * 100_000
def ok(text): print("PROBE-OUTCOME ok: " + str(text), flush=True)
def wrong(text): print("PROBE-OUTCOME wrong: " + str(text), flush=True)
def web(url, **options):
    from stoker.storage import open_storage
    from stoker.storage.policies import RetryPolicy
    retry = RetryPolicy(attempts=2, deadline=10, open_deadline=10, base_delay=0.01)
    return open_storage(url, headers=SECRETS, retry=retry, timeout=5, **options)
def read_all(storage):
    data = storage.read_many(list(storage.keys)); storage.close(); return data
def stoker_cli(*arguments, timeout=110):
    code = "import sys; from stoker.cli import main; sys.exit(main())"
    try:
        done = subprocess.run([sys.executable, "-c", code, *arguments], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"PROBE-OUTCOME hang (stoker {arguments[0]} killed at {timeout} s)", flush=True); sys.exit(0)
    if "Traceback" in done.stderr:
        wrong("a raw traceback: " + done.stderr.strip().splitlines()[-1][:100]); sys.exit(0)
    return done
def tokenizer_with(change):
    from stoker_testbed.data.text import make_corpus
    texts, plain = make_corpus(work / "corpus", documents=30, files=1)
    document = json.loads(Path(plain).read_text()); change(document)
    (work / "tokenizer.json").write_text(json.dumps(document))
    return texts, work / "corpus" / "part-000.jsonl", plain, work / "tokenizer.json"
def tokens(corpus, tokenizer, **options):
    from stoker.loader import TokenLoader
    loader = TokenLoader(corpus, tokenizer=tokenizer, context_length=64, batch_size=2, shuffle=False, **options)
    return sum(batch.real_tokens for batch in loader), loader
def padding(strategy, multiple=None):
    return {"strategy": strategy, "direction": "Right", "pad_to_multiple_of": multiple, "pad_id": 0, "pad_type_id": 0, "pad_token": "</s>"}
def mds(compression=None):  # an MDS folder of one shard laid out by hand (MosaicML's writer costs 700 MB)
    import struct
    folder = work / "mds"; folder.mkdir()
    encoded = [struct.pack("<I", 100) + bytes([number]) * 100 + struct.pack("<q", number % 3) for number in range(20)]
    offsets = [4 + 4 * (len(encoded) + 1)]
    for sample in encoded: offsets.append(offsets[-1] + len(sample))
    raw = struct.pack(f"<I{len(offsets)}I", len(encoded), *offsets) + b"".join(encoded)
    shard = {"column_encodings": ["bytes", "int"], "column_names": ["image", "label"], "column_sizes": [None, 8],
             "compression": compression, "format": "mds", "hashes": [], "samples": len(encoded), "size_limit": 1 << 20,
             "version": 2, "raw_data": {"basename": "shard.00000.mds", "bytes": len(raw), "hashes": {}}, "zip_data": None}
    if compression:
        import zstandard
        zipped = zstandard.ZstdCompressor().compress(raw)
        shard["zip_data"] = {"basename": "shard.00000.mds.zstd", "bytes": len(zipped), "hashes": {}}
        (folder / "shard.00000.mds.zstd").write_bytes(zipped)
    else:
        (folder / "shard.00000.mds").write_bytes(raw)
    (folder / "index.json").write_text(json.dumps({"shards": [shard], "version": 2}))
    return folder
def hf_disk():
    from stoker_testbed.data.peer_formats import random_samples, write_hf_disk
    return write_hf_disk(work / "saved", random_samples(10, seed=2), shards=1)
def memory_loader(count=40):
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.storage import MemoryStorage
    keys = [f"k{index:03d}" for index in range(count)]
    return keys, Loader(MemoryStorage({key: key.encode() for key in keys}), batch_size=4, decode=bytes, sampling=Sampling(seed=7, in_order=True))
def delivered(loader):
    return [key for batch in loader for key, valid in zip(batch.keys, batch.valid) if valid]
def kept(expression, table):
    from stoker import Loader
    from stoker.loader import Sampling, Where
    from stoker.storage import MemoryStorage
    data = MemoryStorage({f"s{index:02d}": b"x" for index in range(40)})
    return list(Loader(data, batch_size=4, sampling=Sampling(where=Where(expression, table=table))).storage.keys)
"""


@dataclass(frozen=True)
class Probe:
    """One hostile input: its name, the finding of issue 72 it probes ("beyond": not in its list),
    the child's code (after PRELUDE), and what the parent does around it."""

    name: str
    finding: str
    code: str
    quick: bool = False
    expect_ok: bool = False  # a correct result exists: a named error is a failure too
    answers: tuple[tuple[str, Any, dict[str, str]], ...] = ()  # (path, Answer kwargs, answer() options)
    judge: str = ""  # "headers": no user header reached another origin; "loop", "chain": redirects followed
    timeout: float = 120.0


def _redirect(location: str) -> Any:
    return {"status": b"302 Found", "headers": (("Location", location), ("Content-Length", "0"))}


TOP_PAGE = 'stoker_stage_items_total{{rank="{rank}",stage="{stage}"}} {value}\nstoker_run_seconds_total{{rank="{rank}"}} 10\n'
TOP_FILES = {
    "top/good": TOP_PAGE.format(rank="0", stage="decode", value="12"),
    "top/escapes": TOP_PAGE.format(rank="1", stage="\x1b]0;owned\x07\x1b[2Jdecode", value="12"),
    "top/nan": TOP_PAGE.format(rank="2", stage="decode", value="NaN"),
    "top/inf": TOP_PAGE.format(rank="3", stage="decode", value="+Inf"),
    "top/superscript": TOP_PAGE.format(rank="\u00b2", stage="decode", value="1"),
    "top/digits": TOP_PAGE.format(rank="9" * 5000, stage="decode", value="1"),
}
RAW_CONTROL = "import re; raw = re.compile('[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f]')\n"
BOMB_GB = 3


def _probes() -> list[Probe]:  # noqa: C901 (a list of cases)
    read_objects = "data = read_all(web(home + '/objects/s-{0..2}.jpg')); ok(f'{len(data)} samples read')"
    top = "done = stoker_cli('top', '--once', '--interval', '0.2', *[home + '/top/' + page for page in %r])\n"
    return [
        # 1. A declared length.
        Probe(
            "content-length 10^12: dataset.json",
            "1",
            "read_all(web(home + '/objects/')); wrong('read')",
            True,
            answers=(("objects/dataset.json", HUGE, {"method": "GET"}),),
        ),
        Probe(
            "content-length 10^12: index sidecar",
            "1",
            "read_all(web(home + '/shards/shard-000000.tar')); wrong('read')",
            False,
            answers=(("shards/shard-000000.tar.idx", HUGE, {"method": "GET"}),),
        ),
        Probe("content-length 10^12: a sample's GET", "1", read_objects, True, answers=(("objects/s-1.jpg", HUGE, {"method": "GET"}),)),
        # 2. and 6. A tokenizer file's settings.
        Probe(
            "tokenizer.json truncation (max_length 8)",
            "2",
            """
def change(document): document["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
texts, corpus, plain, path = tokenizer_with(change)
want, _ = tokens(corpus, plain); got, _ = tokens(corpus, path)
(ok if got == want else wrong)(f"{got:,} of {want:,} tokens delivered")""",
            expect_ok=True,
        ),
        Probe(
            "tokenizer.json padding (BatchLongest)",
            "2",
            """
texts, corpus, plain, path = tokenizer_with(lambda document: document.__setitem__("padding", padding("BatchLongest")))
want, _ = tokens(corpus, plain); got, _ = tokens(corpus, path)
(ok if got == want else wrong)(f"{got:,} tokens delivered for {want:,}")""",
            expect_ok=True,
        ),
        Probe(
            "tokenizer padding Fixed 10^9",
            "6",
            """
texts, corpus, plain, path = tokenizer_with(lambda document: document.__setitem__("padding", padding({"Fixed": 10**9})))
from stoker.ops import Tokenizer
ids, lengths = Tokenizer(path).encode(texts[:4]); ok(f"lengths {lengths.tolist()}")""",
        ),
        Probe(
            "tokenizer 8 Replace('') normalizers",
            "6",
            """
step = {"type": "Replace", "pattern": {"String": ""}, "content": "ab"}
texts, corpus, plain, path = tokenizer_with(lambda d: d.__setitem__("normalizer", {"type": "Sequence", "normalizers": [step] * 8}))
from stoker.ops import Tokenizer
ids, lengths = Tokenizer(path).encode(["words " * 8_000]); ok(f"{int(lengths[0]):,} tokens")""",
        ),
        Probe(
            "tokenizer stride > max_length",
            "6",
            """
truncation = {"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 10}
texts, corpus, plain, path = tokenizer_with(lambda document: document.__setitem__("truncation", truncation))
from stoker.ops import Tokenizer
ids, lengths = Tokenizer(path).encode(texts[:4]); ok(f"lengths {lengths.tolist()}")""",
        ),
        Probe(
            "tokenizer regex (a|aa)+(?=b), 41 chars, skip",
            "6",
            """
from stoker.loader import FailurePolicy
split = {"type": "Split", "pattern": {"Regex": "(a|aa)+(?=b)"}, "behavior": "Isolated", "invert": False}
def change(document): document["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, document["pre_tokenizer"]]}
texts, corpus, plain, path = tokenizer_with(change)
lines = [json.dumps({"text": text}) for text in ["a" * 41, *texts[:10]]]
(work / "hostile.jsonl").write_text("\\n".join(lines) + "\\n")
got, loader = tokens(work / "hostile.jsonl", path, failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None))
ok(f"{got:,} tokens, {len(loader.failures)} document(s) failed by name")""",
            expect_ok=True,
        ),
        # 3. and 4. The node cache.
        Probe(
            "node cache: planted symlinked entries",
            "3",
            """
from stoker.storage import SampleCache
victim = work / "dataset"; victim.mkdir()
for name in ("data.mdb", "lock.mdb", "labels.json"): (victim / name).write_bytes(b"the victim's " + name.encode())
shared = work / "shm"; shared.mkdir(); os.chmod(shared, 0o1777)
planted = shared / "cache"; planted.mkdir(); (planted / "entries").symlink_to(victim); os.chmod(planted, 0o777)
if os.geteuid() == 0: os.chown(planted, 54321, 54321)
try:
    cache = SampleCache(planted, max_bytes=4 << 20); cache.put("s1", b"x" * 20480); cache.get("s1"); cache.close()
finally:
    left = sorted(path.name for path in victim.iterdir())
    if left != ["data.mdb", "labels.json", "lock.mdb"]: wrong(f"the victim folder holds {left}"); sys.exit(0)
ok("the victim survives, the cache works")""",
            True,
        ),
        Probe(
            "node cache: a link in a shared folder to a victim",
            "3",
            """
from stoker.storage import SampleCache
victim = work / "dataset"; victim.mkdir()
for name in ("data.mdb", "lock.mdb", "labels.json"): (victim / name).write_bytes(b"the victim's " + name.encode())
shared = work / "shm"; shared.mkdir(); os.chmod(shared, 0o1777); (shared / "cache").symlink_to(victim)
try:
    cache = SampleCache(shared / "cache", max_bytes=4 << 20); cache.put("s1", b"x" * 20480); cache.get("s1"); cache.close()
finally:
    left = {path.name: path.read_bytes() for path in victim.iterdir()}
    if sorted(left) != ["data.mdb", "labels.json", "lock.mdb"] or any(not data.startswith(b"the victim") for data in left.values()):
        wrong(f"the victim folder changed: {sorted(left)}"); sys.exit(0)
ok("the victim survives")""",
            False,
        ),
        Probe(
            "node cache: random bytes over its files, 8 trials",
            "4",
            """
import random
from stoker.storage import SampleCache
payload = lambda index: bytes([index % 251]) * (20 << 10)
wrong_bytes = 0
for trial in range(8):
    folder = work / f"trial-{trial}"
    cache = SampleCache(folder, max_bytes=8 << 20)
    for index in range(40): cache.put(f"s{index}", payload(index))
    cache.close()
    noise = random.Random(trial)
    for target in sorted(path for path in folder.rglob("*") if path.is_file()):
        head = target.read_bytes()[:8192] if trial % 2 else b""  # odd trials keep the meta pages
        target.write_bytes(head + noise.randbytes(1 << 20))
    cache = SampleCache(folder, max_bytes=8 << 20)
    wrong_bytes += sum(cache.get(f"s{index}") not in (None, payload(index)) for index in range(40))
    cache.put("after", payload(7)); assert cache.get("after") == payload(7), "the cache works after the damage"
    cache.close()
(ok if not wrong_bytes else wrong)(f"8 trials, {wrong_bytes} entries read as other bytes")""",
            False,
            expect_ok=True,
        ),
        # 5. Redirects.
        Probe(
            "user header across a 302 to another port",
            "5",
            read_objects,
            True,
            judge="headers",
            answers=(
                ("objects/s-1.jpg", _redirect("{other}/hop/1"), {"origin": "home"}),
                ("hop/1", _redirect("{other}/objects/s-1.jpg"), {}),
            ),
        ),
        Probe(
            "user header across a 302 to another host name",
            "5",
            read_objects,
            False,
            judge="headers",
            answers=(
                ("objects/s-1.jpg", _redirect("{other_host}/hop/1"), {"origin": "home"}),
                ("hop/1", _redirect("{other_host}/objects/s-1.jpg"), {}),
            ),
        ),
        Probe(
            "credentials in the URL across a 302 to another port",
            "beyond",
            """
url = home.replace("http://", "http://user:PW-SECRET-3@") + "/objects/s-{0..2}.jpg"
from stoker.storage import open_storage
storage = open_storage(url, timeout=5); data = storage.read_many(list(storage.keys)); storage.close(); ok(f"{len(data)} samples read")""",
            False,
            judge="headers",
            answers=(("objects/s-1.jpg", _redirect("{other}/objects/s-1.jpg"), {"origin": "home"}),),
        ),
        Probe(
            "redirect loop",
            "5",
            read_objects,
            True,
            judge="loop",
            answers=(("objects/s-2.jpg", _redirect("/objects/s-2.jpg"), {"method": "GET"}),),
        ),
        Probe(
            "a chain of 100 redirects",
            "beyond",
            read_objects,
            False,
            judge="chain",
            answers=tuple(("objects/s-2.jpg" if hop == 0 else f"hop/{hop}", _redirect(f"/hop/{hop + 1}"), {}) for hop in range(100)),
        ),
        Probe(
            "a redirect to file:///etc/passwd",
            "beyond",
            read_objects,
            False,
            answers=(("objects/s-1.jpg", _redirect("file:///etc/passwd"), {"method": "GET"}),),
        ),
        Probe(f"gzip bomb body ({BOMB_GB} GB inflated)", "beyond", read_objects, answers=(("objects/s-1.jpg", {"body": "{bomb}"}, {}),)),
        Probe(
            "endless bodies (no Content-Length) on 16 samples HEAD said were 100 bytes",
            "beyond",
            """
import resource
from stoker.storage import open_storage
from stoker.storage.policies import RetryPolicy
storage = open_storage(home + "/endless/s-{0..15}.jpg", retry=RetryPolicy(attempts=1, deadline=60, open_deadline=60))
failed = sum(isinstance(result, Exception) for result in storage.try_read_indices(range(16)))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
(ok if peak < 1024 else wrong)(f"{failed} of 16 named failures, after holding {peak:,.0f} MB for 1.6 KB of samples")""",
            answers=tuple((f"endless/s-{number}.jpg", {"endless": True}, {"method": "GET"}) for number in range(16)),
        ),
        Probe(
            "10,000 response header lines",
            "beyond",
            read_objects,
            False,
            answers=(("objects/s-1.jpg", {"headers": tuple(("X-Pad", "y" * 32) for _ in range(10_000)), "body": b"abc"}, {}),),
        ),
        Probe(
            "a response header line of 16 MB",
            "beyond",
            read_objects,
            False,
            answers=(("objects/s-1.jpg", {"headers": (("X-Pad", "y" * (16 << 20)),), "body": b"abc"}, {}),),
        ),
        # 7. image_sizes.
        Probe(
            "truncated JPEG to image_sizes after a good one",
            "7",
            """
from stoker.ops import image_sizes
from stoker_testbed.data.images import jpeg
good, bad = jpeg(32, 24, seed=5), b"\\xff\\xd8\\xff"
first, later = image_sizes([good, bad]), image_sizes([bad])
widths = (first.widths.tolist(), later.widths.tolist())
(ok if widths == ([32, 0], [0]) else wrong)(f"widths {widths}")""",
            True,
            expect_ok=True,
        ),
        # 8. stoker top.
        Probe(
            "stoker top: ESC/BEL in labels and reason phrase",
            "8",
            RAW_CONTROL
            + top % (["escapes", "reason"],)
            + """
found = raw.findall(done.stdout)
(wrong if found else ok)(f"exit {done.returncode}, {len(found)} raw control characters on the terminal")""",
            True,
            answers=(("top/reason", {"status": b"503 \x1b[2J\x1b]0;owned\x07Unavailable"}, {}),),
        ),
        Probe(
            "stoker top: NaN, Inf, superscript, 5000-digit rank",
            "8",
            top % (["good", "nan", "inf", "superscript", "digits"],)
            + """
named = sum(line.count("unreadable") for line in done.stdout.splitlines())
said = (done.stderr.strip().splitlines() or [""])[-1][:60]
(ok if done.returncode == 0 and "decode" in done.stdout and named == 4 else wrong)(f"exit {done.returncode}, {named} of 4 named unreadable {said}")
""",
            False,
        ),
        Probe(
            "stoker top: a page trickling a byte every 0.5 s",
            "8",
            top % (["trickle"],)
            + """
said = done.stdout + done.stderr  # exit status 1: every endpoint unreachable (stoker top's own rule)
(ok if done.returncode in (0, 1) and "unreachable" in said else wrong)(f"exit {done.returncode}: " + said.strip()[-80:])""",
            answers=(("top/trickle", {"headers": (("Content-Length", "400"),), "body": b"x" * 400, "piece": 1, "pause": 0.5}, {}),),
        ),
        # 9. Memory.
        Probe(
            "brace list of 10^7 URLs: open + first batch",
            "9",
            """
from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import HTTPStorage
class Answered(HTTPStorage):  # each HEAD and GET answered in the process: what stoker holds per file
    async def _head(self, name): return {"size": 4}
    async def _request(self, index, extension=None): return b"\\xff\\xd8\\xff\\xd9"
storage = Answered("https://host.example/data/img-{0000000..9999999}.jpg")
batch = next(iter(Loader(storage, batch_size=256, decode=bytes, sampling=Sampling(shuffle="uniform", seed=1))))
ok(f"{len(storage.keys):,} URLs, a first batch of {len(batch.keys)}")""",
            timeout=240,
        ),
        Probe(
            "MDS zstd shard declaring raw_data.bytes 2^62",
            "9",
            """
import zstandard
from stoker.storage.formats import PeerFormatStorage
folder = mds(compression="zstd"); index = json.loads((folder / "index.json").read_text())
packer = zstandard.ZstdCompressor().compressobj(); zeros = bytes(1 << 20)
bomb = b"".join(packer.compress(zeros) for _ in range(256)) + packer.flush(); shard = index["shards"][0]  # 256 MB of zeros
(folder / shard["zip_data"]["basename"]).write_bytes(bomb)
shard["zip_data"]["bytes"], shard["raw_data"]["bytes"] = len(bomb), 1 << 62
(folder / "index.json").write_text(json.dumps(index))
storage = PeerFormatStorage(folder); storage.read_many(list(storage.keys)[:1]); wrong("read")""",
        ),
        Probe(
            "4 GB sparse index.json",
            "9",
            """
from stoker.storage import open_storage
folder = mds()
with open(folder / "index.json", "r+b") as file: file.truncate(4 << 30)  # holes: nothing on disk
try: open_storage(folder); wrong("opened")
finally: (folder / "index.json").unlink()""",
        ),
        Probe(
            "state with 10^5 mixture changes",
            "9",
            """
import copy
from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage, MixedStorage
def mixture():
    parts = {name: MemoryStorage({f"{name}{index}": b"x" for index in range(50)}) for name in "ab"}
    return Loader(MixedStorage(parts, {"a": 1.0, "b": 1.0}, seed=1), batch_size=4, sampling=Sampling(seed=2))
loader = mixture(); batches = iter(loader); next(batches); loader.set_mixture_weights({"a": 2.0, "b": 1.0}); next(batches)
state = loader.state_dict(); loader.close()
state["mixture"]["changes"] = [copy.deepcopy(state["mixture"]["changes"][0]) for _ in range(100_000)]
resumed = mixture(); resumed.load_state_dict(state); wrong("resumed")""",
            timeout=180,
        ),
        # 10. Unnamed errors and silent acceptance: JSON.
        Probe(
            "deep JSON: MDS index.json",
            "10",
            """
from stoker.storage import open_storage
folder = mds(); (folder / "index.json").write_bytes(b'{"shards": ' + DEEP + b"}"); open_storage(folder); wrong("opened")""",
            True,
        ),
        Probe(
            "deep JSON: LitData index.json",
            "10",
            """
from stoker.storage import open_storage
folder = work / "lit"; folder.mkdir(); (folder / "chunk-0-0.bin").write_bytes(bytes(64))
(folder / "index.json").write_bytes(b'{"config": {}, "chunks": ' + DEEP + b"}"); open_storage(folder); wrong("opened")""",
            False,
        ),
        Probe(
            "deep JSON: save_to_disk state.json",
            "10",
            """
from stoker.storage import open_storage
folder = hf_disk(); (folder / "state.json").write_bytes(b'{"_data_files": ' + DEEP + b"}"); open_storage(folder); wrong("opened")""",
        ),
        Probe(
            "deep JSON: dataset_info.json",
            "10",
            """
from stoker.storage import open_storage
folder = hf_disk(); (folder / "dataset_info.json").write_bytes(b'{"features": ' + DEEP + b"}")
ok(f"{len(open_storage(folder))} samples read without it")""",
            expect_ok=True,
        ),
        Probe(
            "deep JSON: key list metadata",
            "10",
            """
import pyarrow.parquet as pq
from stoker.loader.state import KeyList, write_key_list
path = write_key_list(work / "keys.parquet", ["a", "b"], dataset="d1", blocks=None)
pq.write_table(pq.read_table(path).replace_schema_metadata({b"stoker.key_list": DEEP}), path)
KeyList(path, dataset="d1", samples=2); wrong("read")""",
            False,
        ),
        Probe(
            "deep JSON: a loader state file",
            "beyond",
            """
from stoker.distributed import read_state_file
(work / "state.json").write_bytes(b'{"version": 1, "sampler": ' + DEEP + b"}"); read_state_file(work / "state.json"); wrong("read")""",
            False,
        ),
        Probe(
            "deep JSON: a local dataset.json",
            "beyond",
            """
from stoker.storage import open_storage
folder = work / "data"; folder.mkdir(); (folder / "dataset.json").write_bytes(b'{"format": ' + DEEP + b"}"); open_storage(folder)
wrong("opened")""",
            False,
        ),
        Probe(
            "deep JSON: a JSON Lines sample",
            "beyond",
            """
from stoker.storage import JsonlStorage
(work / "x.jsonl").write_bytes(b'{"text": "a"}\\n' + DEEP + b'\\n{"text": "b"}\\n')
storage = JsonlStorage(work / "x.jsonl"); data = storage.read_many(list(storage.keys)); ok(f"{len(data)} lines read as bytes")""",
            False,
        ),
        # Filters.
        Probe(
            "filter with a 4000-digit number",
            "10",
            """
keys = kept("score < " + "9" * 3990, {"key": [f"s{index:02d}" for index in range(40)], "score": [float(index) for index in range(40)]})
(ok if len(keys) == 40 else wrong)(f"{len(keys)} of 40 kept")""",
            True,
            expect_ok=True,
        ),
        Probe(
            "filter `score in [1] in [1]`",
            "10",
            """
kept("score in [1] in [1]", {"key": [f"s{index:02d}" for index in range(40)], "score": [1.0] * 40}); wrong("accepted")""",
            False,
        ),
        Probe(
            "filter on a pandas string column with NA",
            "10",
            """
import pandas as pd
lang = pd.Series(["en", pd.NA, "de", "en"] * 10, dtype="string")
keys = kept("lang == 'en'", pd.DataFrame({"key": [f"s{index:02d}" for index in range(40)], "lang": lang}))
(ok if len(keys) == 20 else wrong)(f"{len(keys)} of 20 kept")""",
            False,
            expect_ok=True,
        ),
        Probe(
            "filter side table with a non-UTF-8 key",
            "10",
            """
table = {"key": [*[f"s{index:02d}" for index in range(39)], b"\\xff\\xfe"], "score": [1.0] * 40}
keys = kept("score > 0", table); wrong(f"{len(keys)} kept")""",
            False,
        ),
        Probe(
            "filter nested 1,900 parentheses deep",
            "beyond",
            """
kept("(" * 1900 + "score > 0" + ")" * 1900, {"key": [f"s{index:02d}" for index in range(40)], "score": [1.0] * 40}); ok("kept")""",
            False,
        ),
        Probe(
            "filter calling __import__('os').system",
            "beyond",
            """
try: kept("__import__('os').system('touch " + str(work / "pwned") + "') == 0", {"key": [f"s{i:02d}" for i in range(40)], "score": [1.0] * 40})
finally:
    if (work / "pwned").exists(): wrong("the filter ran a shell command"); sys.exit(0)
wrong("accepted")""",
            False,
        ),
        # Keys, brace bounds, states, inspect.
        Probe("brace bound of 5000 digits", "10", "web(home + '/a-{0..' + '9' * 5000 + '}.tar'); wrong('opened')", True),
        Probe("a URL with an IPv6 host left unclosed", "beyond", "web('http://[::1/a-{0..2}.jpg'); wrong('opened')"),
        Probe(
            "a second server's URL with credentials in a list",
            "beyond",
            "web(home + '/objects/s-0.jpg::http://user:PW-SECRET-3@127.0.0.2/b.jpg'); wrong('opened')",
            False,
        ),
        Probe(
            "exclude(keys=<generator>)",
            "10",
            """
keys, loader = memory_loader(); loader.exclude(keys=(key for key in ["k003", "k017", "k029"])); got = delivered(loader)
(ok if len(got) == 37 else wrong)(f"{40 - len(got)} of 3 excluded")""",
            True,
            expect_ok=True,
        ),
        Probe(
            "null in a key list file",
            "10",
            """
import pyarrow as pa, pyarrow.parquet as pq
keys, first = memory_loader(); batches = iter(first); seen = [*next(batches).keys, *next(batches).keys]
state = first.state_dict(); path = first.save_keys(work); first.close()
table = pq.read_table(path); column = table.column("key").to_pylist(); victim = next(key for key in keys if key not in seen)
column[keys.index(victim)] = None
pq.write_table(pa.table({"key": pa.array(column, pa.large_string())}, schema=table.schema), path)
from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage
resumed = Loader(MemoryStorage({key: b"x" for key in [*keys, "k-new"]}), batch_size=4, decode=bytes, sampling=Sampling(seed=7, in_order=True))
resumed.load_state_dict(state, keys_before=path); got = delivered(resumed)
(ok if victim in got else wrong)(f"the null's sample {victim} " + ("delivered" if victim in got else "pushed out of the epoch"))""",
            True,
        ),
        Probe(
            "a key list of 10^8 entries",
            "beyond",
            """
keys, loader = memory_loader(); loader.exclude(keys=(f"x{index}" for index in range(10**8))); wrong(f"{len(delivered(loader))} delivered")""",
            False,
        ),
        Probe(
            "a token state without `documents`",
            "10",
            """
from stoker.loader import TokenLoader
from stoker.ops import Tokenizer
from stoker_testbed.data.text import EOS, make_corpus
texts, plain = make_corpus(work / "text", documents=60, files=1)
make = lambda: TokenLoader(work / "text", tokenizer=Tokenizer(plain, eos=EOS), context_length=32, batch_size=2, seed=1)
saved = make(); next(iter(saved)); state = saved.state_dict(); state.pop("documents")
make().load_state_dict(state); wrong("accepted")""",
        ),
        Probe(
            "a manifest naming a FIFO and /dev/zero",
            "beyond",
            """
from stoker.storage import FileStorage
(work / "x.jpg").write_bytes(b"\\xff\\xd8\\xff\\xd9"); os.mkfifo(work / "fifo.jpg"); (work / "zero.jpg").symlink_to("/dev/zero")
(work / "m.csv").write_text("path,label\\nx.jpg,0\\nfifo.jpg,1\\nzero.jpg,1\\n")
storage = FileStorage(work / "m.csv"); results = storage.try_read_indices(range(len(storage)))
failed = [key for key, result in zip(storage.keys, results) if isinstance(result, Exception)]
(ok if sorted(failed) == ["fifo.jpg", "zero.jpg"] else wrong)(f"{len(results) - len(failed)} read, {failed} failed by name")""",
            True,
            timeout=60,
        ),
        Probe(
            "stoker inspect on a folder with a symlink loop",
            "10",
            """
from stoker_testbed.data.images import jpeg
cat = work / "data" / "cat"; cat.mkdir(parents=True); (cat / "x.jpg").write_bytes(jpeg(16, 16, seed=1))
(cat / "up").symlink_to(".."); (cat / "self.jpg").symlink_to("self.jpg"); (work / "data" / "loop").symlink_to("loop")
done = stoker_cli("inspect", str(work / "data"))
(ok if done.returncode == 0 else wrong)(f"exit {done.returncode}: " + (done.stdout.strip().splitlines() or [""])[0][:80])""",
            True,
        ),
    ]


def _publish(server: Any, folder: Path) -> None:
    """The honest files the HTTP probes read: three objects and their dataset.json, a tar shard
    with its sidecar, and metrics pages."""
    from stoker.ingest import convert_storage
    from stoker_testbed.data.datasets import dataset

    for number in range(3):
        server.files[f"objects/s-{number}.jpg"] = hashlib.sha256(bytes([number])).digest() * (40 + 30 * number)
    samples = [[f"s-{number}.jpg", 0] for number in range(3)]
    server.files["objects/dataset.json"] = json.dumps({"format": "stoker.objects", "samples": samples}).encode()
    convert_storage(dataset(6), folder / "shards", shard_size=1 << 20, progress=False, decode_check=False)
    for path in sorted((folder / "shards").iterdir()):
        server.files[f"shards/{path.name}"] = path.read_bytes()
    server.files.update({name: text.encode() for name, text in TOP_FILES.items()})
    server.files.update({f"endless/s-{number}.jpg": bytes(100) for number in range(16)})


def _gzip_bomb() -> bytes:
    """BOMB_GB gigabytes of zeros, gzipped (a few MB)."""
    deflate, chunk = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(1 << 20)  # wbits 31: the gzip format
    return b"".join(deflate.compress(chunk) for _ in range(BOMB_GB << 10)) + deflate.flush()


def _install(server: Any, probe: Probe, bomb: list[bytes]) -> None:
    from stoker_testbed.servers.hostile_http import Answer

    server.reset()
    for path, answer, options in probe.answers:
        if answer.get("body") == "{bomb}":
            bomb[:] = bomb or [_gzip_bomb()]
            answer = {"body": bomb[0], "headers": (("Content-Encoding", "gzip"), ("Content-Length", str(len(bomb[0]))))}
        server.answer(path, Answer(**answer), **options)


def _outcome(stdout: str, stderr: str, status: int, probe: Probe) -> tuple[str, str]:
    """(outcome, verdict) from what the child wrote and how it ended."""
    marks = [line for line in stdout.splitlines() if line.startswith(("PROBE-OUTCOME ", "PROBE-RAISED "))]
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        said = [line for line in lines if any(word in line for word in ("memory allocation", "panicked", "Fatal"))] + lines[-1:]
        return f"signal {number} ({signal.Signals(number).name})" + (f": {said[0][:80]}" if said else ""), "FAILS"
    if not marks:
        said = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or ["(nothing said)"]
        return f"exit {os.WEXITSTATUS(status)}: {said[0][:100]}", "FAILS"
    mark = marks[-1]
    if mark.startswith("PROBE-OUTCOME "):
        text = mark.removeprefix("PROBE-OUTCOME ")
        return text, "held" if text.startswith("ok:") else "FAILS"
    kind, _, message = mark.removeprefix("PROBE-RAISED ").partition(": ")
    text = f"{kind.rsplit('.', 1)[-1]}: {message[:110]}"
    if kind.endswith(("ImportError", "ModuleNotFoundError")):
        return f"n/a (no such API): {message[:80]}", "n/a"
    named = kind.startswith("stoker.") and "Panic" not in kind
    return text, "held" if named and not probe.expect_ok else "FAILS"


CHILD = """
import atexit, sys
def peak():  # this process's own high-water mark of resident memory (its mm's, since its exec)
    with open("/proc/self/status") as status:
        print("PROBE-PEAK " + next(line for line in status if line.startswith("VmHWM")).split()[1], flush=True)
atexit.register(peak)
try:
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "__probe__"})
except SystemExit:
    raise
except BaseException as error:
    kind = type(error)
    where = "" if kind.__module__ == "builtins" else kind.__module__ + "."
    print("\\nPROBE-RAISED " + where + kind.__qualname__ + ": " + (str(error).strip().splitlines() or [""])[0], flush=True)
    sys.exit(3)
"""


def _high_water_kb(pid: int, marker: str) -> int:
    """The child's peak resident memory so far (VmHWM, kB), once it runs the probe (before its exec,
    /proc shows this process's copy: ``wait4``'s ru_maxrss starts from that too, so it is not used)."""
    try:
        if marker not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
            return 0
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")), 0)


def run_probe(probe: Probe, python: str, path: str | None, server: Any, memory_gb: float) -> dict[str, Any]:
    """Run ``probe`` in a child of ``python`` (``path``: its PYTHONPATH) capped at ``memory_gb``."""
    work = Path(tempfile.mkdtemp(prefix="stoker-probe-"))
    try:
        (work / "probe.py").write_text(PRELUDE + probe.code)
        env = {**os.environ, "PROBE_WORK": str(work), "PROBE_HOME": server.home if server else ""}
        if path is not None:
            env["PYTHONPATH"] = path
        limit = int(memory_gb * (1 << 30))

        def bound() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        with open(work / "out", "w") as out, open(work / "err", "w") as err:
            import subprocess

            started = time.monotonic()
            child = subprocess.Popen(
                [python, "-c", CHILD, str(work / "probe.py")], stdout=out, stderr=err, env=env, cwd=work,
                preexec_fn=bound, start_new_session=True,
            )  # fmt: skip
            peak_kb = 0
            while True:
                peak_kb = max(peak_kb, _high_water_kb(child.pid, str(work)))
                pid, status = os.waitpid(child.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - started > probe.timeout:
                    os.killpg(child.pid, signal.SIGKILL)
                    _, status = os.waitpid(child.pid, 0)
                    break
                time.sleep(0.05)
            child.returncode = 0  # reaped here: Popen must not wait for it again
            seconds = time.monotonic() - started
        stdout = (work / "out").read_text(errors="replace")
        reported = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("PROBE-PEAK ")]
        peak_mb = max([peak_kb, *reported]) / 1024
        if seconds > probe.timeout:
            outcome, verdict = f"hang (killed at {probe.timeout:.0f} s)", "FAILS"
        else:
            outcome, verdict = _outcome(stdout, (work / "err").read_text(errors="replace"), status, probe)
        if "MemoryError" in outcome:
            outcome += f" (at the {memory_gb:g} GB cap)"
        if server is not None and probe.judge == "headers":
            sent = {
                name for request in server.requests_to_other_origins() for name in request.headers if name in ("x-api-key", "authorization")
            }
            if sent:
                outcome, verdict = f"wrong: {', '.join(sorted(sent))} sent to another origin; {outcome}", "FAILS"
        if "SECRET" in stdout + (work / "err").read_text(errors="replace"):
            outcome, verdict = f"wrong: a secret shown; {outcome}", "FAILS"
        if server is not None and probe.judge == "loop":  # named at its first repeat: one GET of the looping URL
            looped = sum(request.method == "GET" and request.target == "/objects/s-2.jpg" for request in server.requests)
            outcome, verdict = f"{outcome} ({looped} GETs of the loop)", verdict if looped <= 2 else "FAILS"
        if server is not None and probe.judge == "chain":  # at most 5 redirects followed
            hops = sum(request.target.startswith("/hop/") for request in server.requests)
            outcome, verdict = f"{outcome} ({hops} redirects followed)", verdict if hops <= 5 else "FAILS"
        outcome = re.sub(r"[\w:-]*SECRET[\w-]*", "<secret>", outcome)  # the table shows where, not the secret
        return {"outcome": outcome, "verdict": verdict, "seconds": seconds, "rss_mb": peak_mb}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _cell(text: str) -> str:
    """Text for a markdown table cell: pipes and control characters escaped."""
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return text.replace("|", "\\|").replace("`", "'")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the cheap probes only (under 30 s in all)")
    parser.add_argument("--only", default="", help="comma-separated substrings of the probes' names")
    parser.add_argument("--python", default=sys.executable, help="the children's interpreter")
    parser.add_argument("--path", default=None, help="the children's PYTHONPATH (default: as this process's)")
    parser.add_argument("--label", default="after", help="the children's build, as the table names it")
    parser.add_argument("--compare", nargs=2, metavar=("PYTHON", "PYTHONPATH"), help="a 'before' build, run beside")
    parser.add_argument("--memory-gb", type=float, default=6.0, help="each child's address space cap")
    parser.add_argument("--json", type=Path, help="write the results there too")
    parser.add_argument("--tables", nargs="+", type=Path, help="print the table of these --json files, side by side, and stop")
    arguments = parser.parse_args()
    if arguments.tables:
        merged: dict[str, dict[str, Any]] = {}
        for table in arguments.tables:
            for name, row in json.loads(table.read_text()).items():
                merged.setdefault(name, {}).update(row)
        order = {probe.name: number for number, probe in enumerate(_probes())}
        merged = dict(sorted(merged.items(), key=lambda item: order.get(item[0], len(order))))
        print_table(merged, list(dict.fromkeys(build for row in merged.values() for build in row if build != "finding")))
        return
    wanted = [part for part in arguments.only.split(",") if part]
    probes = [
        probe for probe in _probes() if (probe.quick or not arguments.quick) and (not wanted or any(part in probe.name for part in wanted))
    ]
    builds = [(arguments.label, arguments.python, arguments.path)]
    if arguments.compare:
        builds.insert(0, ("before", *arguments.compare))
    from stoker_testbed.servers.hostile_http import HostileHttpServer

    results: dict[str, dict[str, Any]] = {}
    bomb: list[bytes] = []
    server = HostileHttpServer()
    try:
        with tempfile.TemporaryDirectory(prefix="stoker-probes-") as scratch:
            _publish(server, Path(scratch))
            for probe in probes:
                for build, python, path in builds:
                    _install(server, probe, bomb)
                    result = run_probe(probe, python, path, server, arguments.memory_gb)
                    results.setdefault(probe.name, {"finding": probe.finding})[build] = result
                    said = f"{probe.name} [{build}] {result['seconds']:.1f} s: {result['verdict']}: {result['outcome']}"
                    print(said, file=sys.stderr, flush=True)
    finally:
        with contextlib.suppress(TimeoutError):  # a connection still flooded by a probe's answer
            server.close()
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1))
    print_table(results, [build for build, _, _ in builds])


def print_table(results: dict[str, dict[str, Any]], builds: list[str]) -> None:
    """The markdown table of ``results`` (probe name to its finding and each build's result), a
    column group per build, in probe order; "not run" where a build lacks a probe."""
    print("| # | probe |" + "".join(f" {build}: outcome | time | peak RSS |" for build in builds))
    print("|---|---|" + "---|---:|---:|" * len(builds))
    for name, row in results.items():
        cells = ""
        for build in builds:
            result = row.get(build)
            if result is None:
                cells += " not run | | |"
                continue
            outcome = f"**{result['verdict']}** {_cell(result['outcome'])}"
            cells += f" {outcome} | {result['seconds']:.1f} s | {result['rss_mb']:,.0f} MB |"
        print(f"| {row['finding']} | {_cell(name)} |{cells}")
    for build in builds:
        verdicts = [row[build]["verdict"] for row in results.values() if build in row]
        print(f"\n{build}: {verdicts.count('held')} held, {verdicts.count('FAILS')} fail, {verdicts.count('n/a')} n/a of {len(verdicts)}")


if __name__ == "__main__":
    main()
