"""The `stoker` command.

stoker bench [PATH] [--batch-size 32] [--latency-ms 0] [--duration 20] [--json RUN.json]
stoker bench --scenario small-files|starvation|padding|pinned
stoker report RUN.json [--out DIR]
stoker convert SRC DST [--to shards|lmdb|parquet|objects] [--shard-size 256MB] [--row-group-size 32MB] [--ray [ADDRESS]]
    DST may be s3://bucket/prefix or az://container/prefix (objects or shards) or cassandra://host:port/keyspace
stoker split SRC -o SPLITS.json [--ratios train=0.8,val=0.1,test=0.1 | --folds K]
    [--balance original|uniform|LABEL=WEIGHT,...] [--group-column COL] [--seed 0]
stoker inspect PATH [--json]
stoker index SHARD.tar [SHARD.tar ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._bounded import shown
from .errors import ConfigurationError
from .ingest import convert_storage, format_report, inspect_storage
from .loader import SHUFFLES
from .storage import open_storage
from .storage.local import build_index, index_path, load_index, write_index

# Sizes are binary, as `du -h` and most storage tools mean them: 1 MB = 1 MiB = 2**20 bytes.
_UNITS = {
    **{unit: 1 for unit in ("", "B")},
    **{unit: 1 << 10 for unit in ("K", "KB", "KIB")},
    **{unit: 1 << 20 for unit in ("M", "MB", "MIB")},
    **{unit: 1 << 30 for unit in ("G", "GB", "GIB")},
    **{unit: 1 << 40 for unit in ("T", "TB", "TIB")},
}


# Characters of an error message shown: a listing of ten failed samples fits.
_MESSAGE_LIMIT = 8_000
# The largest size an option takes: past a petabyte a size is a typing slip, not a plan.
_MAX_SIZE = 1 << 50


def parse_size(text: str) -> int:
    """``"256MB"`` -> 268435456 (units are binary: KB, MB, GB, TB, or KiB, MiB, GiB, TiB).

    Raises:
        argparse.ArgumentTypeError: Not a size (``inf`` and ``nan`` are not), under a byte or
            over a petabyte; the message shows what one looks like.
    """
    stripped = text.strip().upper().replace(" ", "")
    number = stripped.rstrip("KMGTIB")
    unit = stripped[len(number) :]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not math.isfinite(value) or value <= 0 or value * _UNITS[unit] < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a size like 256MB or 1.5GiB")
    if value * _UNITS[unit] > _MAX_SIZE:
        raise argparse.ArgumentTypeError(f"{text}: over the largest size stoker takes, 1 PiB")
    return int(value * _UNITS[unit])


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high``, refused by name outside them (a
    batch of a trillion samples is a typing slip that would otherwise end in MemoryError)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value:,} is outside {low:,}..{high:,}")
        return value

    return parse


def real_number(low: float, high: float, *, above_low: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from ``low`` (or above it) to ``high``; ``nan`` and
    ``inf`` are refused (a duration of nan never ends)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > high or value < low or (above_low and value == low):
            bound = f"over {low:g}" if above_low else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text}: expected a finite number {bound} and at most {high:g}")
        return value

    return parse


_COUNT = whole_number(1, 1 << 20)  # batch sizes, concurrency, windows
_INDEX = whole_number(0, (1 << 63) - 1)  # steps, ranks, seeds


class _HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless it has none (None, a flag) or already
    says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS or "default" in text:
            return text
        if not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from . import _native

    try:
        package = version("stoker")
    except PackageNotFoundError:
        package = "unknown"
    build = _native.build_info()
    return f"stoker {package} (native core {build['version']}, {'optimized' if build['optimized'] else 'DEBUG'} build)"


def _upload(arguments: argparse.Namespace) -> int:
    from .ingest import read_metadata_csv, upload_to_cassandra, upload_to_object_store

    scheme = arguments.destination.split("://", 1)[0].lower()
    if scheme in ("gs", "gcs"):
        raise ConfigurationError(
            f"{arguments.destination}: stoker reads gs:// in place but does not write it: convert to a local folder "
            "(stoker convert SRC DIR --to shards), copy it with gcloud storage cp -r, then open the URL"
        )
    with open_storage(arguments.source) as source:
        if scheme in ("s3", "az", "azure", "abfs", "abfss"):
            to = arguments.to or "objects"
            if to not in ("objects", "shards"):
                raise ConfigurationError(f"--to {to}: an object store destination takes objects or shards")
            report = upload_to_object_store(
                source,
                arguments.destination,
                to=to,
                shard_size=arguments.shard_size,
                concurrency=arguments.concurrency or 32,
                progress=not arguments.quiet,
                decode_check=not arguments.no_decode_check,
            )
        else:
            metadata = read_metadata_csv(arguments.metadata) if arguments.metadata else None
            report = upload_to_cassandra(
                source,
                arguments.destination,
                metadata=metadata,
                concurrency=arguments.concurrency or 8,
                replication=arguments.replication,
                progress=not arguments.quiet,
                decode_check=not arguments.no_decode_check,
            )
    print(
        f"wrote {report.samples} samples ({report.bytes / 1e6:.1f} MB new) to {report.destination}; checked before writing: {report.checked}"
    )
    _print_skipped(report.skipped)
    return 0


def _print_skipped(skipped: list[tuple[str, str]]) -> None:
    """The samples a conversion left out, by name (the first 20), and why."""
    if not skipped:
        return
    print(f"left out {len(skipped)} samples that cannot be used:")
    for key, why in skipped[:20]:
        print(f"  - {shown(key)}: {shown(why)}")
    if len(skipped) > 20:
        print(f"  ... and {len(skipped) - 20} more")


def _parse_ratios(text: str) -> dict[str, float]:
    ratios = {}
    for part in text.split(","):
        name, _, share = part.partition("=")
        if not name or not share:
            raise ConfigurationError(f"--ratios: expected name=share,..., got {text!r}")
        ratios[name.strip()] = float(share)
    return ratios


def _parse_balance(text: str) -> str | dict[str, float]:
    if text in ("original", "uniform"):
        return text
    return _parse_ratios(text)


def _split(arguments: argparse.Namespace) -> int:
    from .ingest import read_metadata_csv
    from .sampling import k_folds, split_samples, write_splits
    from .storage.remote import read_metadata_table

    groups = None
    if arguments.source.startswith(("cassandra://", "scylla://", "scylladb://")):
        columns = [arguments.label_column] + ([arguments.group_column] if arguments.group_column else [])
        table = read_metadata_table(arguments.source, columns)
        ids, labels = table["key"], table[arguments.label_column]
        if arguments.group_column:
            groups = table[arguments.group_column]
    else:
        with open_storage(arguments.source) as storage:
            ids = list(storage.keys)
            classes = storage.classes
            labels = [classes[label] if classes and isinstance(label, int) else label for label in storage.labels]
        if arguments.group_column:
            if not arguments.metadata:
                raise ConfigurationError("--group-column needs --metadata CSV for a source without a metadata table")
            rows = read_metadata_csv(arguments.metadata)
            missing = [key for key in ids if key not in rows]
            if missing:
                raise ConfigurationError(f"{arguments.metadata}: no row for {len(missing)} samples, e.g. {missing[0]!r}")
            groups = [rows[key][arguments.group_column] for key in ids]
    balance = _parse_balance(arguments.balance)
    if arguments.folds:
        splits = k_folds(ids, labels, k=arguments.folds, balance=balance, groups=groups, seed=arguments.seed)
    else:
        splits = split_samples(ids, labels, ratios=_parse_ratios(arguments.ratios), balance=balance, groups=groups, seed=arguments.seed)
    write_splits(
        arguments.output,
        splits,
        source=arguments.source,
        seed=arguments.seed,
        balance=balance,
        ratios=None if arguments.folds else _parse_ratios(arguments.ratios),
        folds=arguments.folds,
        group_column=arguments.group_column,
    )
    for name, keys in splits.items():
        print(f"{name:<14} {len(keys):>9} samples")
    print(f"splits written to {arguments.output}; read one with stoker.sampling.read_split(path, name)")
    return 0


def _convert(arguments: argparse.Namespace) -> int:
    if "://" in arguments.destination:
        return _upload(arguments)
    destination = arguments.destination.rstrip("/")
    to = arguments.to or ("lmdb" if destination.endswith(".lmdb") else "parquet" if destination.endswith(".parquet") else "shards")
    if arguments.ray is not None:
        if to != "shards":
            raise SystemExit("stoker convert: --ray writes tar shards only")
        from .ray import convert_with_ray

        report = convert_with_ray(arguments.source, destination, shard_size=arguments.shard_size, address=arguments.ray or None)
        print(
            f"wrote {report.samples} samples ({report.bytes / 1e6:.1f} MB) in {report.shards} shards to {report.destination} with Ray; "
            "verified: every sample read back byte for byte (checked by bytes only: no decode check with --ray)"
        )
        return 0
    with open_storage(arguments.source) as source:
        report = convert_storage(
            source,
            arguments.destination,
            to=to,
            shard_size=arguments.shard_size,
            row_group_size=arguments.row_group_size,
            progress=not arguments.quiet,
            decode_check=not arguments.no_decode_check,
        )
    shards = f" in {report.shards} {'files' if report.format == 'parquet' else 'shards'}" if report.format in ("shards", "parquet") else ""
    print(
        f"wrote {report.samples} samples ({report.bytes / 1e6:.1f} MB){shards} to {report.destination}; "
        f"checked before packing: {report.checked}; verified: every sample read back byte for byte"
    )
    _print_skipped(report.skipped)
    return 0


def _inspect(arguments: argparse.Namespace) -> int:
    report = inspect_storage(arguments.path)
    print(json.dumps(report, indent=1) if arguments.json else format_report(report))
    return 0


def _index(arguments: argparse.Namespace) -> int:
    from pathlib import Path

    for shard in arguments.shards:
        path = Path(shard)
        if arguments.upgrade and index_path(path).exists():
            # A JSON index (versions 1 and 2) holds everything version 3 does: rewritten without
            # reading the shard again (checked against it first, as an opening would).
            index = load_index(path)
            write_index(index)
            print(f"{index_path(path)}: {len(index)} samples, rewritten in version 3 from the index")
            continue
        index = build_index(path, checksums=not arguments.no_checksums, label_key=arguments.label_key)
        write_index(index)
        print(f"{index_path(path)}: {len(index)} samples")
    return 0


def _bench(arguments: argparse.Namespace) -> int:
    import tempfile

    from .bench import (
        Comparison,
        PeerData,
        compare,
        format_comparison,
        format_shuffle,
        image_folder,
        peer_data,
        require_optimized_core,
        run_loader,
    )
    from .observe import CpuLimits
    from .ops import ImageTransform
    from .storage.policies import describe_traffic

    require_optimized_core()
    from .bench import SCENARIOS

    if arguments.tokenizer:
        return _bench_text(arguments)

    if arguments.scenario:
        print(SCENARIOS[arguments.scenario]())
        return 0
    if arguments.path:
        root = arguments.path
        dataset = arguments.path
    else:
        root = str(image_folder(arguments.images, progress=not arguments.quiet))
        dataset = f"{arguments.images} generated JPEGs 500x375, about 45 KB each ({root})"
    # The headline output: uint8 CHW batches (normalization belongs on the accelerator).
    transform = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW")
    with open_storage(root) as storage:
        ours = run_loader(
            storage,
            batch_size=arguments.batch_size,
            transform=transform,
            fetch_concurrency=arguments.fetch_concurrency,
            decode_concurrency=arguments.decode_concurrency,
            latency_seconds=arguments.latency_ms / 1e3,
            step_seconds=arguments.step_ms / 1e3,
            duration=arguments.duration,
            progress=not arguments.quiet,
            shuffle=arguments.shuffle,
            shuffle_window=arguments.shuffle_window,
        )
    diagnosed = {key: value for key, value in ours.as_dict().items() if key not in ("stats", "diagnosis")}
    cores = CpuLimits.read().affinity
    print(f"\nstoker bench: {dataset}; Resize(256) + CenterCrop(224); batch {arguments.batch_size}; {cores} cores")
    print(
        f"diagnosed run (stoker.Loader in this process, {ours.seconds:.0f} s, uint8 CHW): {ours.images_per_second:,.0f} images/s, "
        f"{ours.megabytes_per_second:.1f} MB/s read, CPU {ours.cpu_percent / cores:.0f}% of {cores} cores, "
        f"peak RSS {ours.peak_rss_mb:.0f} MB, first batch {ours.first_batch_seconds:.2f} s"
    )
    print(format_shuffle(ours.shuffle))
    if ours.storage:
        per_epoch = f"; about ${ours.storage['dollars_per_epoch']:,.4f} an epoch" if "dollars_per_epoch" in ours.storage else ""
        print(f"storage over the run: {describe_traffic(ours.storage)}{per_epoch}")
    results = [diagnosed]
    float_results: list[dict[str, Any]] = []
    if not arguments.no_peers:
        with tempfile.TemporaryDirectory(prefix="stoker-bench-peers-") as scratch:
            bad = {bad["key"] for bad in ours.bad_samples}
            peers = (
                PeerData(Path(root), note=dataset)
                if not arguments.path
                else peer_data(arguments.path, Path(scratch), arguments.images, bad)
            )
            comparison = Comparison(left_out=[f"{name} ({reason})" for name, reason in peers.reasons.items()])
            if peers.root is not None:
                if not arguments.quiet:
                    print(f"Now each method in its own process, into uint8 then float32 batches, over {peers.note}:", file=sys.stderr)
                comparison = compare(peers.root, progress=not arguments.quiet, cannot_read=peers.reasons)
            print(format_comparison(comparison, cores))
        results = [{"name": name, "output": "uint8", **row} for name, row in comparison.rows.get("uint8", {}).items()] or results
        float_results = [{"name": name, "output": "float32", **row} for name, row in comparison.rows.get("float32", {}).items()]
    print(f"\ndiagnosis: {ours.diagnosis['message']}")
    _print_bad_samples(ours.bad_samples)
    if arguments.json:
        run = {
            "format": "stoker.bench-run",
            "version": 1,
            "dataset": dataset,
            "cores": cores,
            "batch_size": arguments.batch_size,
            "results": results,
            "float32_results": float_results,
            "diagnosed_run": diagnosed,
            "diagnosis": ours.diagnosis,
            "stats": ours.stats,
        }
        Path(arguments.json).write_text(json.dumps(run, indent=1))
        print(f"run written to {arguments.json}; `stoker report {arguments.json}` makes plots and a page")
    return 0


def _bench_text(arguments: argparse.Namespace) -> int:
    """`stoker bench CORPUS --tokenizer tokenizer.json`: the text path on the user's corpus."""
    from dataclasses import asdict

    from .bench import format_text_run, run_text_loader

    if not arguments.path:
        raise SystemExit("stoker bench --tokenizer needs a text corpus: JSON Lines files, Parquet with a text column, or tar shards")
    run = run_text_loader(
        arguments.path,
        arguments.tokenizer,
        text_field=arguments.text_field,
        context_length=arguments.context_length,
        batch_size=arguments.batch_size,
        duration=arguments.duration,
    )
    print(format_text_run(run))
    _print_bad_samples(run.bad_documents)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps({"format": "stoker.bench-text-run", "version": 1, **asdict(run)}, indent=1))
        print(f"run written to {arguments.json}")
    return 0


def _print_bad_samples(bad_samples: list[dict[str, Any]]) -> None:
    """Each bad sample once, by name, with what was wrong and how often it came up (once an
    epoch, typically)."""
    if not bad_samples:
        return
    by_sample: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for bad in bad_samples:
        by_sample.setdefault((bad["key"], bad["stage"]), []).append(bad)
    print(f"bad samples: {len(by_sample)} ({len(bad_samples)} times in all), by name:")
    for (key, stage), times in list(by_sample.items())[:10]:
        reasons = " / ".join(dict.fromkeys(bad["reason"] for bad in times))
        actions = "/".join(dict.fromkeys(bad["action"].split(" ")[0] for bad in times))
        print(f"  - {shown(key)} ({shown(stage)}): {shown(reasons)} -> {shown(actions)}{f', {len(times)} times' if len(times) > 1 else ''}")
    if len(by_sample) > 10:
        print(f"  ... and {len(by_sample) - 10} more (all in --json's run file)")


def _top(arguments: argparse.Namespace) -> int:
    from .observe import top

    return top(arguments.urls, interval=arguments.interval, once=arguments.once)


def _report(arguments: argparse.Namespace) -> int:
    from .observe import write_report

    page = write_report(arguments.run_file, arguments.out)
    print(f"report: {page}")
    return 0


def _show_exclusions(exclusions: list[dict[str, Any]]) -> int:
    """What `Loader.exclude` left out of the run, as the ledger's directory records it."""
    if not exclusions:
        print("no exclusions recorded")
        return 0
    for made in exclusions:
        what = f"steps {made['steps'][0]} to {made['steps'][1]}" if made["steps"] is not None else "by key"
        keys = ", ".join(shown(key) for key in made["keys"][:5]) + (", ..." if made["samples"] > 5 else "")
        print(f"rank {made['rank']}, epoch {made['epoch']}, at step {made['step']}: {what}, {made['samples']} samples left out ({keys})")
    return 0


def _replay(arguments: argparse.Namespace) -> int:
    import numpy as np

    from .loader import replay
    from .observe import read_exclusions, read_ledger

    if arguments.exclusions:
        return _show_exclusions(read_exclusions(arguments.ledger, rank=arguments.rank_given))
    arguments.rank = arguments.rank_given or 0
    if arguments.step is None:
        print("stoker replay: give --step N (a recorded batch) or --exclusions", file=sys.stderr)
        return 2
    batch = replay(
        arguments.ledger,
        arguments.step,
        rank=arguments.rank,
        storage=arguments.storage,
        verify=not arguments.no_verify,
        trust_ledger_source=arguments.storage_from_ledger,
    )
    rows = read_ledger(arguments.ledger, rank=arguments.rank)
    rows = rows.filter(rows.column("step").to_numpy() == arguments.step).to_pydict()
    print(f"step {arguments.step} of rank {arguments.rank}: epoch {rows['epoch'][0]}, batch {batch.index}, {len(batch.keys)} samples")
    for slot, key in enumerate(batch.keys):
        flags = [name for name, on in (("padding", batch.padding[slot]), ("replaced", batch.replaced[slot])) if on]
        if not batch.valid[slot] and not batch.padding[slot]:
            flags.append("zero-filled")
        where = shown(rows["location"][slot]) + (f" @ {rows['offset'][slot]}" if rows["offset"][slot] >= 0 else "")
        print(
            f"  {slot:>4} {shown(key)}  {where}  {rows['length'][slot]} bytes  crc {rows['checksum'][slot]:08x}  seed {rows['seed'][slot]}"
            + (f"  ({', '.join(flags)})" if flags else "")
        )
    print("every sample's bytes match the ledger" if not arguments.no_verify else "not verified (--no-verify)")
    if arguments.out:
        data = batch.data if isinstance(batch.data, np.ndarray) else np.array(batch.data, dtype=object)
        np.save(arguments.out, data, allow_pickle=not isinstance(batch.data, np.ndarray))
        print(f"batch data: {arguments.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``stoker`` command line: each command with its arguments, every one with help."""
    parser = argparse.ArgumentParser(prog="stoker", description="Keeps accelerators fed.")
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser(
        "bench", help="measure the Loader (and its peers) and name the bottleneck", formatter_class=_HelpWithDefaults
    )
    bench.add_argument(
        "path",
        nargs="?",
        help="a dataset: a path, s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or cassandra://host/keyspace (default: generated JPEGs)",
    )
    bench.add_argument("--batch-size", type=_COUNT, default=32, help="samples per batch")
    bench.add_argument("--fetch-concurrency", type=_COUNT, default=None, help="batches fetched at once (4 local, 8 remote)")
    bench.add_argument("--decode-concurrency", type=_COUNT, default=None, help="batches decoded at once (default: the cores)")
    bench.add_argument("--shuffle", choices=SHUFFLES, default="uniform", help="the Loader's shuffle (block: by shards or row groups)")
    bench.add_argument("--shuffle-window", type=_COUNT, default=32, help="blocks mixed together by --shuffle block")
    bench.add_argument("--latency-ms", type=real_number(0, 3.6e6), default=0.0, help="delay added to every storage read")
    bench.add_argument("--step-ms", type=real_number(0, 3.6e6), default=0.0, help="simulated training step after each batch")
    bench.add_argument("--duration", type=real_number(0, 1e6, above_low=True), default=20.0, help="seconds of measurement")
    bench.add_argument(
        "--images",
        type=whole_number(1, 10**8),
        default=2000,
        help="generated JPEGs when no PATH is given; with a PATH, the most of its images each peer reads (a sample)",
    )
    bench.add_argument("--no-peers", action="store_true", help="skip the peers (PyTorch DataLoader, SPDL, a bare thread pool)")
    bench.add_argument("--json", help="write the run (results, stats, diagnosis) here")
    bench.add_argument("--scenario", choices=("small-files", "starvation", "padding", "pinned"), help="run one of the papers' experiments")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.add_argument("--tokenizer", help="a tokenizer.json: PATH is a raw text corpus, tokenized and packed by TokenLoader")
    bench.add_argument("--text-field", default="text", help="with --tokenizer: the JSON field or Parquet column of the text")
    bench.add_argument("--context-length", type=whole_number(1, 1 << 24), default=2048, help="with --tokenizer: tokens per packed row")
    bench.set_defaults(run=_bench)
    top = commands.add_parser("top", formatter_class=_HelpWithDefaults, help="running loaders live, from their metrics endpoints (q quits)")
    top.add_argument("urls", nargs="+", metavar="URL", help="a loader's metrics endpoint (serve_metrics): http://HOST:PORT/metrics")
    top.add_argument("--interval", type=real_number(0.1, 3600), default=1.0, help="seconds between refreshes")
    top.add_argument(
        "--once",
        action="store_true",
        help="print one refresh (figures over one interval) and exit: 1 when no endpoint gave a loader's figures, else 0",
    )
    top.set_defaults(run=_top)
    report = commands.add_parser(
        "report", formatter_class=_HelpWithDefaults, help="plots and an HTML page from a `stoker bench --json` run"
    )
    report.add_argument("run_file", metavar="RUN.json", help="a run written by `stoker bench --json RUN.json`")
    report.add_argument("--out", help="folder for the report (default: next to RUN.json)")
    report.set_defaults(run=_report)
    convert = commands.add_parser(
        "convert", formatter_class=_HelpWithDefaults, help="a dataset to indexed tar shards, LMDB, Parquet, an S3 bucket or Cassandra"
    )
    convert.add_argument(
        "source",
        help="a dataset: an image folder, shards, LMDB, Parquet, s3://, gs:// or az://bucket/prefix, or cassandra://host:port/keyspace",
    )
    convert.add_argument(
        "destination", help="a folder, a .lmdb path, s3://bucket/prefix, az://container/prefix or cassandra://host:port/keyspace"
    )
    convert.add_argument(
        "--to",
        choices=("shards", "lmdb", "parquet", "objects"),
        default=None,
        help="default: lmdb when DST ends in .lmdb, parquet when it ends in .parquet, objects for s3:// and az://, else shards",
    )
    convert.add_argument("--shard-size", type=parse_size, default="256MB", help="start a new shard (or Parquet file) past this size")
    convert.add_argument("--row-group-size", type=parse_size, default="32MB", help="Parquet: payload bytes per row group")
    convert.add_argument(
        "--concurrency", type=whole_number(1, 4096), default=None, help="writes in flight (default: 32 to S3, 8 to Cassandra)"
    )
    convert.add_argument("--metadata", help="CSV of key,column,... written to Cassandra's metadata table")
    convert.add_argument("--replication", type=whole_number(1, 100), default=1, help="replication factor of a new Cassandra keyspace")
    convert.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="convert to shards on a Ray cluster (ADDRESS, e.g. auto or host:6379; none: a local one); same bytes as without",
    )
    convert.add_argument(
        "--no-decode-check",
        action="store_true",
        help="pack every file as it is (by default images are decoded first, and empty or undecodable ones left out and listed)",
    )
    convert.add_argument("--quiet", action="store_true", help="no progress bar")
    convert.set_defaults(run=_convert)
    split = commands.add_parser(
        "split", formatter_class=_HelpWithDefaults, help="train/val/test lists or k folds of sample ids, seeded, balanced, groups whole"
    )
    split.add_argument("source", help="cassandra://host:port/keyspace (its metadata table) or any dataset")
    split.add_argument("-o", "--output", required=True, help="the splits file (JSON) to write")
    split.add_argument("--ratios", default="train=0.8,val=0.1,test=0.1", help="split names and shares")
    split.add_argument("--folds", type=whole_number(2, 1 << 30), default=None, help="k-fold cross-validation instead of ratios")
    split.add_argument("--balance", default="original", help="original, uniform, or LABEL=WEIGHT,...")
    split.add_argument("--label-column", default="label", help="the metadata column balanced on")
    split.add_argument("--group-column", default=None, help="keep all rows with one value of this column in one split")
    split.add_argument("--metadata", help="CSV of key,column,... (groups for a source without a metadata table)")
    split.add_argument("--seed", type=_INDEX, default=0, help="seeds the shuffle; the same seed gives the same splits")
    split.set_defaults(run=_split)
    inspect = commands.add_parser("inspect", formatter_class=_HelpWithDefaults, help="format, sample count, shards, sizes, label histogram")
    inspect.add_argument(
        "path",
        help="a dataset: a folder, shards, a .lmdb path, Parquet files, s3://, gs:// or az://bucket/prefix, or cassandra://host:port/keyspace",
    )
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.set_defaults(run=_inspect)
    index = commands.add_parser("index", formatter_class=_HelpWithDefaults, help="write the sidecar index of existing WebDataset shards")
    index.add_argument("shards", nargs="+", help="WebDataset .tar shards (an index is written next to each)")
    index.add_argument("--no-checksums", action="store_true", help="skip CRC-32s (indexing reads less)")
    index.add_argument("--label-key", help="take labels from this field of each sample's .json (a.b reaches inside)")
    index.add_argument(
        "--upgrade",
        action="store_true",
        help="rewrite an existing index in the current version without reading its shard (an index written by an older "
        "stoker opens slower); a shard without one is indexed",
    )
    index.set_defaults(run=_index)
    replay = commands.add_parser(
        "replay", formatter_class=_HelpWithDefaults, help="build a recorded batch again from a provenance ledger, checking every sample"
    )
    replay.add_argument("ledger", help="the run's ledger directory (loader.record_provenance(DIR))")
    replay.add_argument("--step", type=_INDEX, default=None, help="the rank's batch number since the run began")
    replay.add_argument(
        "--exclusions", action="store_true", help="list what Loader.exclude left out of the run (every rank's, or --rank's)"
    )
    replay.add_argument("--rank", type=whole_number(0, 1 << 20), default=None, dest="rank_given", help="which rank's batch (default 0)")
    replay.add_argument("--storage", default=None, help="read the samples here (a path or URL)")
    replay.add_argument(
        "--storage-from-ledger",
        action="store_true",
        help="read the samples from the path or URL the ledger names (only for a ledger you trust: it decides where "
        "this machine's credentials for that store are sent)",
    )
    replay.add_argument("--out", default=None, help="save the batch's data here (.npy)")
    replay.add_argument("--no-verify", action="store_true", help="do not check each sample's length and CRC-32 against the ledger")
    replay.set_defaults(run=_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``stoker`` command line; the exit status."""
    arguments = build_parser().parse_args(argv)
    try:
        return arguments.run(arguments)
    except BrokenPipeError:
        # The reader went away (`stoker inspect ... | head`): stop quietly, as Unix tools do.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (OSError, ValueError, ImportError) as error:  # StorageError is an OSError
        # The message names files, samples and servers' answers: outside text, shown escaped.
        print(f"stoker {arguments.command}: {shown(error, _MESSAGE_LIMIT, lines=True)}", file=sys.stderr)
        return 1
    except (MemoryError, RecursionError) as error:
        # A last line of defence: each input is bounded where it is read, and a case that still
        # gets here is a bug to report, said in one line rather than a traceback.
        print(f"stoker {arguments.command}: {type(error).__name__}: {error or 'out of memory'} (please report this input)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"stoker {arguments.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
