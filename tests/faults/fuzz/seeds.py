"""The fuzz suite's seed files, one small valid file per format (or a dataset folder for the
storage formats), made once per test session: images by Pillow, audio and video by the ffmpeg
command, shards, LMDB and Parquet by stoker's own converter."""

from __future__ import annotations

import gzip
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import zstandard
from PIL import Image

from stoker import Loader
from stoker.ingest import convert_storage
from stoker.loader import Sampling
from stoker.ops import ImageTransform
from stoker.storage import FileStorage, SampleCache
from stoker_testbed.data.images import encode, photo
from stoker_testbed.data.media_files import require_ffmpeg, tone_with_clicks, wav_bytes
from stoker_testbed.data.peer_formats import (
    jpeg_samples,
    write_array_record,
    write_hf_disk,
    write_lance,
    write_litdata,
    write_mds,
    write_tfrecords,
)
from stoker_testbed.data.text import make_corpus

from ..conftest import make_images
from .operator_inputs import make_seeds as operator_seeds
from .tokenizer_mutations import make_seed as make_tokenizer_seed
from .worker import NODE_CACHE_BYTES, NODE_CACHE_ENTRIES, mixture_loader, node_cache_payload, token_loader


@dataclass(frozen=True)
class Seed:
    """A format's seed: the folder a case is made in (a copy of it), and the file mutated there."""

    format: str
    folder: Path
    file: str


def _ffmpeg(output: Path, *arguments: str) -> None:
    subprocess.run([require_ffmpeg(), "-v", "error", "-y", *arguments, str(output)], check=True)


def make_seeds(root: Path) -> dict[str, Seed]:
    """Every format's seed under ``root``."""
    seeds: dict[str, Seed] = {}

    def single(kind: str, name: str, data: bytes | None = None) -> Path:
        folder = root / kind
        folder.mkdir(parents=True, exist_ok=True)
        if data is not None:
            (folder / name).write_bytes(data)
        seeds[kind] = Seed(kind, folder, name)
        return folder / name

    pixels = photo(48, 40, seed=11)
    single("jpeg", "seed.jpg", encode(pixels, "JPEG", quality=90))
    single("png", "seed.png", encode(pixels, "PNG"))
    single("webp", "seed.webp", encode(Image.fromarray(pixels), "WEBP", quality=80))
    wav = wav_bytes(tone_with_clicks(0.5, 16_000, 440.0, [0.1]), 16_000)
    single("wav", "seed.wav", wav)
    tone = root / "tone.wav"
    tone.write_bytes(wav)
    _ffmpeg(single("flac", "seed.flac"), "-i", str(tone), "-c:a", "flac")
    _ffmpeg(single("mp3", "seed.mp3"), "-i", str(tone), "-c:a", "libmp3lame", "-b:a", "32k")
    _ffmpeg(single("ogg", "seed.ogg"), "-i", str(tone), "-c:a", "libopus", "-b:a", "16k")
    _ffmpeg(single("m4a", "seed.m4a"), "-i", str(tone), "-c:a", "aac", "-b:a", "32k")
    video = ("-f", "lavfi", "-i", "testsrc=size=48x32:rate=10", "-frames:v", "6")
    _ffmpeg(single("mp4", "seed.mp4"), *video, "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p")
    _ffmpeg(single("mkv", "seed.webm"), *video, "-c:v", "libvpx-vp9", "-deadline", "realtime")
    images = root / "images"
    make_images(images, count=6)
    for kind, to, name, file in (
        ("tar", "shards", "shards", "shard-000000.tar"),
        ("tar-index", "shards", "shards", "shard-000000.tar.idx"),
        ("lmdb", "lmdb", "data.lmdb", "data.mdb"),
        ("parquet", "parquet", "parquet", "part-00000.parquet"),
    ):
        folder = root / kind / name
        with FileStorage(images) as source:
            convert_storage(source, folder, to=to, progress=False)
        seeds[kind] = Seed(kind, folder, file)
    # JSON Lines text corpora: a line of each kind a document can be (text, nested, unicode), compressed.
    lines = b"".join(
        json.dumps(document).encode() + b"\n"
        for document in ({"text": "plain words " * 20}, {"text": "caf\u00e9 \u2603 " * 10, "id": 7}, {"meta": {"a": 1}, "text": "x"})
    )
    single("jsonl", "corpus.jsonl", lines * 20)  # plain: the line indexer and its line bound
    single("jsonl-gz", "corpus.jsonl.gz", gzip.compress(lines * 20))
    single("jsonl-zst", "corpus.jsonl.zst", zstandard.ZstdCompressor(write_content_size=True).compress(lines * 20))
    # A tokenizer.json in the shape published ones have, beside a small corpus its TokenLoader reads.
    make_tokenizer_seed(root / "tokenizer")
    seeds["tokenizer"] = Seed("tokenizer", root / "tokenizer", "tokenizer.json")
    # A provenance ledger of two batches over the images (replay reads them from there).
    loader = Loader(images, batch_size=3, transform=ImageTransform(random_resized_crop=16, flip_probability=0.5))
    loader.record_provenance(root / "ledger" / "ledger")
    for _ in loader:
        pass
    loader.close()
    # Where the images are, beside the ledger: the worker replays against them, not against the
    # path the (mutated) ledger names, which could be any folder on the machine.
    (root / "ledger" / "ledger" / "images.path").write_text(str(images))
    seeds["ledger"] = Seed("ledger", root / "ledger" / "ledger", "rank-00000-0000.arrows")
    # A Loader's state mid-epoch, two batches in (the sampler's spans, the digest, the fingerprint).
    loader = Loader(images, batch_size=3, sampling=Sampling(seed=5))
    for number, _ in enumerate(loader):
        if number == 1:
            break
    state_file = single("loader-state", "state.json", json.dumps(loader.state_dict()).encode())
    loader.close()
    (state_file.parent / "images.path").write_text(str(images))
    # A mixture Loader's state after a change of weights and with a schedule pending (the parts
    # a mixture adds: its epoch's changes, each with its record of delivered spans, the schedule).
    loader = mixture_loader(str(images))
    loader.set_mixture_schedule({4: {"a": 1.0, "b": 1.0}})
    batches = iter(loader)
    next(batches)
    loader.set_mixture_weights({"a": 3.0, "b": 1.0})
    next(batches)
    state_file = single("mixture-state", "state.json", json.dumps(loader.state_dict()).encode())
    loader.close()
    (state_file.parent / "images.path").write_text(str(images))
    # A TokenLoader's state mid-epoch (sampler, packer with its pieces, what the documents are).
    _, tokenizer = make_corpus(root / "token-state" / "text", documents=40, files=1)
    loader = token_loader(str(root / "token-state" / "text"), str(tokenizer))
    next(iter(loader))
    state_file = single("token-state", "state.json", json.dumps(loader.state_dict()).encode())
    (state_file.parent / "corpus.path").write_text(f"{root / 'token-state' / 'text'}\n{tokenizer}")
    # The peers' formats, written by their own libraries: MDS (a raw shard, a zstd one, the
    # index), LitData (items, Arrow rows), TFRecord (plain, gzip), a save_to_disk folder's Arrow file.
    samples = [(payload[:300], label) for payload, label in jpeg_samples(12, size=16)]
    write_mds(root / "mds" / "mds", samples, size_limit=1 << 20)
    seeds["mds"] = Seed("mds", root / "mds" / "mds", "shard.00000.mds")
    seeds["mds-index"] = Seed("mds-index", root / "mds" / "mds", "index.json")
    write_mds(root / "mds-zstd" / "mds", samples, compression="zstd", size_limit=1 << 20)
    seeds["mds-zstd"] = Seed("mds-zstd", root / "mds-zstd" / "mds", "shard.00000.mds.zstd")
    write_tfrecords(root / "tfrecord" / "records", samples, files=1)
    seeds["tfrecord"] = Seed("tfrecord", root / "tfrecord" / "records", "train.tfrecord-00000-of-00001")
    write_tfrecords(root / "tfrecord-gz" / "records", samples, files=1, compress=True)
    seeds["tfrecord-gz"] = Seed("tfrecord-gz", root / "tfrecord-gz" / "records", "train.tfrecord-00000-of-00001.gz")
    for kind, items in (("litdata", True), ("litdata-arrow", False)):
        write_litdata(root / kind / "lit", samples, chunk_bytes="1MB", items=items)
        seeds[kind] = Seed(kind, root / kind / "lit", "chunk-0-0.bin")
    seeds["litdata-index"] = Seed("litdata-index", root / "litdata" / "lit", "index.json")
    write_array_record(root / "array_record" / "ar", samples, files=1)
    seeds["array_record"] = Seed("array_record", root / "array_record" / "ar", "train.array_record-00000-of-00001")
    lance_uri = write_lance(root / "lance" / "train.lance", samples, rows_per_file=1000)
    data_file = next((lance_uri / "data").glob("*.lance"))
    seeds["lance"] = Seed("lance", lance_uri, f"data/{data_file.name}")
    write_hf_disk(root / "datasets" / "saved", samples, shards=1)
    seeds["datasets"] = Seed("datasets", root / "datasets" / "saved", "data-00000-of-00001.arrow")
    seeds["datasets-state"] = Seed("datasets-state", root / "datasets" / "saved", "state.json")
    seeds["datasets-info"] = Seed("datasets-info", root / "datasets" / "saved", "dataset_info.json")
    # Operator inputs: a key list file, and a side table in each format a user reads one from.
    for kind, (folder, name) in operator_seeds(root / "operator").items():
        seeds[kind] = Seed(kind, folder, name)
    # A node cache's folder, its entries over three segments: its index (the state's two copies,
    # the slots), its first segment (records), its boot mark.
    cache_folder = root / "node-cache" / "cache"
    cache = SampleCache(cache_folder, max_bytes=NODE_CACHE_BYTES)
    for index in range(NODE_CACHE_ENTRIES):
        cache.put(f"s{index}", node_cache_payload(index))
    cache.close()
    for kind, file in (
        ("node-cache-index", "entries/index"),
        ("node-cache-log", "entries/log-0000000000000000"),
        ("node-cache-boot", "entries/boot"),
    ):
        seeds[kind] = Seed(kind, cache_folder, file)
    return seeds
