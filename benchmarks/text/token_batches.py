"""Raw text to packed token batches, side by side on one corpus and one tokenizer.

    python benchmarks/text/token_batches.py                  # ~1 GB of JSON Lines, 60 s per loader
    python benchmarks/text/token_batches.py --megabytes 8 --seconds 8    # quick (what the test runs)

The corpus (web-like documents, log-normal lengths, see `stoker.bench._text_corpus`) is written
once as JSON Lines files under ``--data`` and a byte-level BPE is trained on a sample of it. Each
loader runs in a process of its own (so its CPU and peak memory are its own, worker processes
included) and delivers batches of 8 rows of 2,048 tokens, EOS between documents:

- stoker: ``TokenLoader(folder, tokenizer=...)``: block-shuffled reads, tokenization in
  threads (Rust, GIL released), best-fit packing with documents kept whole, exact resume.
- HF datasets: ``load_dataset("json", streaming=True).map(tokenize, batched=True)`` and
  torchtitan's greedy packer (tokens concatenated and cut into rows of ``context + 1``).
- torch DataLoader, 2 workers: an ``IterableDataset`` that reads its workers' share of the
  files, tokenizes 256 documents per call and packs greedily; ``batch_size=8``.

Every loader runs the same tokenizer with its thread pool on, its best setting: the peers call
the ``tokenizers`` package's batch encode (``encode_batch_fast``); stoker calls the crate that
package binds, from its native core, which writes the ids into one array instead of a Python list
per document (and checks it gives the package's ids). Two ceilings: each of the two alone over
texts already in memory, nothing read, parsed or packed. Tokens/s counts real (non-padding) tokens
delivered over the wall time; CPU is the process's and its children's CPU time over wall time,
in cores of this machine, and "cores per M tokens/s" is what feeding a GPU at a million tokens a
second costs in CPU at this loader's efficiency.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CONTEXT = 2048
BATCH = 8


class Clock:
    """When an arm's measurement began (wall and CPU time); an arm that prepares first restarts it."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.started, self.cpu_before = time.perf_counter(), _cpu_seconds()


def make_data(folder: Path, megabytes: int, files: int = 16) -> tuple[list[Path], Path]:
    """The corpus as ``files`` JSON Lines files totalling about ``megabytes``, and its tokenizer
    (made once; kept across runs)."""
    from stoker.bench import corpus_documents, train_tokenizer, write_jsonl

    folder = folder / f"corpus-{megabytes}mb"
    tokenizer = folder / "tokenizer.json"
    paths = [folder / f"part-{number:03d}.jsonl" for number in range(files)]
    if not tokenizer.exists():
        folder.mkdir(parents=True, exist_ok=True)
        documents = corpus_documents(10**12, seed=0)
        for path in paths:
            write_jsonl(path, documents, target_bytes=megabytes * 1_000_000 // files)
        sample = [json.loads(line)["text"] for _, line in zip(range(3000), open(paths[0]))]
        train_tokenizer(tokenizer, sample, vocabulary=32_000)
    return paths, tokenizer


def run_stoker(paths: list[Path], tokenizer: str, seconds: float, clock: Clock) -> tuple[int, int]:
    from stoker.bench import EOS
    from stoker.loader import TokenLoader
    from stoker.ops import Tokenizer

    loader = TokenLoader(paths[0].parent, tokenizer=Tokenizer(tokenizer, eos=EOS), context_length=CONTEXT, batch_size=BATCH, seed=0)
    tokens = positions = 0
    started = time.perf_counter()
    for batch in loader:
        tokens += batch.real_tokens
        positions += batch.positions
        if time.perf_counter() - started > seconds:
            break
    return tokens, positions


def greedy_rows(token_lists: Any, buffer: list[int]) -> Any:
    """torchtitan's packer: concatenate documents, cut rows of context + 1 (input and shifted labels)."""
    import torch

    for ids in token_lists:
        buffer.extend(ids)
        while len(buffer) >= CONTEXT + 1:
            row = torch.LongTensor(buffer[: CONTEXT + 1])
            del buffer[: CONTEXT + 1]
            yield row[:-1], row[1:]


def run_datasets(paths: list[Path], tokenizer_path: str, seconds: float, clock: Clock) -> tuple[int, int]:
    import torch
    from datasets import load_dataset
    from tokenizers import Tokenizer

    from stoker.bench import EOS

    tokenizer = Tokenizer.from_file(tokenizer_path)
    eos = tokenizer.token_to_id(EOS)

    def tokenize(batch: dict[str, list[Any]]) -> dict[str, list[list[int]]]:
        return {"input_ids": [encoding.ids + [eos] for encoding in tokenizer.encode_batch_fast(batch["text"], add_special_tokens=False)]}

    stream = load_dataset("json", data_files=[str(path) for path in paths], split="train", streaming=True)
    stream = stream.map(tokenize, batched=True, batch_size=1000, remove_columns=["id", "text"])
    tokens = 0
    rows: list[Any] = []
    started = time.perf_counter()
    for inputs, _ in greedy_rows((example["input_ids"] for example in stream), []):
        rows.append(inputs)
        if len(rows) == BATCH:
            batch = torch.stack(rows)
            tokens += batch.numel()
            rows = []
            if time.perf_counter() - started > seconds:
                break
    return tokens, tokens


class _TokenizingDataset:
    """What a competent torch user writes: each worker reads its files, tokenizes in batches, packs."""

    def __init__(self, paths: list[Path], tokenizer_path: str) -> None:
        self.paths = paths
        self.tokenizer_path = tokenizer_path

    def __iter__(self) -> Any:
        import torch.utils.data
        from tokenizers import Tokenizer

        from stoker.bench import EOS

        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        tokenizer = Tokenizer.from_file(self.tokenizer_path)
        eos = tokenizer.token_to_id(EOS)
        buffer: list[int] = []
        for path in self.paths[worker::workers]:
            with open(path, encoding="utf-8") as file:
                texts: list[str] = []
                for line in file:
                    texts.append(json.loads(line)["text"])
                    if len(texts) == 256:
                        yield from self._rows(tokenizer, texts, eos, buffer)
                        texts = []
                yield from self._rows(tokenizer, texts, eos, buffer)

    @staticmethod
    def _rows(tokenizer: Any, texts: list[str], eos: int, buffer: list[int]) -> Any:
        encoded = [encoding.ids + [eos] for encoding in tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
        yield from (inputs for inputs, _ in greedy_rows(encoded, buffer))


def run_torch(paths: list[Path], tokenizer_path: str, seconds: float, clock: Clock) -> tuple[int, int]:
    import torch.utils.data

    class Dataset(_TokenizingDataset, torch.utils.data.IterableDataset):  # type: ignore[misc]
        pass

    loader = torch.utils.data.DataLoader(Dataset(paths, tokenizer_path), batch_size=BATCH, num_workers=2, prefetch_factor=4)
    tokens = 0
    started = time.perf_counter()
    for batch in loader:
        tokens += batch.numel()
        if time.perf_counter() - started > seconds:
            break
    return tokens, tokens


def run_tokenizer_alone(paths: list[Path], tokenizer_path: str, seconds: float, clock: Clock) -> tuple[int, int]:
    """The ceiling every loader here but stoker shares: the package's batch encode over texts
    already in memory (read and parsed before the clock starts), 256 documents a call, nothing
    packed."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_path)
    texts: list[str] = []
    with open(paths[0], encoding="utf-8") as file:
        texts = [json.loads(line)["text"] for line in file]
    clock.restart()
    tokens = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for first in range(0, len(texts), 256):
            tokens += sum(
                len(encoding.ids) + 1 for encoding in tokenizer.encode_batch_fast(texts[first : first + 256], add_special_tokens=False)
            )
            if time.perf_counter() - started > seconds:
                break
    return tokens, tokens


def run_native_alone(paths: list[Path], tokenizer_path: str, seconds: float, clock: Clock) -> tuple[int, int]:
    """stoker's own ceiling: the same tokenizer in the native core (`stoker.ops.Tokenizer`, the
    crate the package binds, ids into one array) over texts already in memory, 256 a call."""
    from stoker.bench import EOS
    from stoker.ops import Tokenizer

    tokenizer = Tokenizer(tokenizer_path, eos=EOS)
    with open(paths[0], encoding="utf-8") as file:
        texts = [json.loads(line)["text"] for line in file]
    tokenizer.encode(texts[:256])  # the first call is checked against the package: not timed
    clock.restart()
    tokens = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for first in range(0, len(texts), 256):
            tokens += len(tokenizer.encode(texts[first : first + 256])[0])
            if time.perf_counter() - started > seconds:
                break
    return tokens, tokens


ARMS = {
    "stoker": run_stoker,
    "HF datasets + greedy packer": run_datasets,
    "torch DataLoader, 2 workers": run_torch,
    "tokenizer alone (the tokenizers package)": run_tokenizer_alone,
    "tokenizer alone (stoker's native copy)": run_native_alone,
}


def measure_arm(name: str, paths: list[Path], tokenizer: str, seconds: float) -> dict[str, Any]:
    """One loader in this process: its tokens, rate, CPU and peak memory."""
    clock = Clock()
    tokens, positions = ARMS[name](paths, tokenizer, seconds, clock)
    wall = time.perf_counter() - clock.started
    cpu = (_cpu_seconds() - clock.cpu_before) / wall
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return {"tokens": tokens, "positions": positions, "seconds": wall, "cpu_cores": cpu, "peak_mb": peak / 1024}


def _cpu_seconds() -> float:
    return sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=1024, help="size of the generated corpus")
    parser.add_argument("--seconds", type=float, default=60.0, help="longest run per loader (the corpus may end first)")
    parser.add_argument("--data", type=Path, default=Path("/tmp/stoker-text-bench"), help="where the corpus is kept between runs")
    parser.add_argument("--arm", help=argparse.SUPPRESS)  # a child process runs one loader
    arguments = parser.parse_args()
    paths, tokenizer = make_data(arguments.data, arguments.megabytes)
    if arguments.arm:
        print(json.dumps(measure_arm(arguments.arm, paths, str(tokenizer), arguments.seconds)))
        return
    from stoker.bench import RATIO_HEADER, ratio_cell, require_optimized_core

    require_optimized_core()
    cores = len(os.sched_getaffinity(0))
    print(
        f"corpus: {sum(path.stat().st_size for path in paths) / 1e6:,.0f} MB of JSON Lines in {len(paths)} files; rows of {CONTEXT} tokens, batches of {BATCH}; {cores} cores"
    )
    results: dict[str, dict[str, Any]] = {}
    for name in ARMS:
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--arm",
                name,
                "--megabytes",
                str(arguments.megabytes),
                "--seconds",
                str(arguments.seconds),
                "--data",
                str(arguments.data),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "TOKENIZERS_PARALLELISM": "true"},
        )
        if child.returncode != 0:
            reason = (child.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"left out: {name} ({reason})")
            continue
        result = json.loads(child.stdout.strip().splitlines()[-1])
        if not result["tokens"]:
            print(f"left out: {name} (delivered no batch in {result['seconds']:.0f} s)")
            continue
        results[name] = result
    print(f"| loader | tokens/s | {RATIO_HEADER} | packing efficiency | CPU (cores of {cores}) | cores per M tokens/s | peak memory |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ours = results.get("stoker", {}).get("tokens", 0) / max(results.get("stoker", {}).get("seconds", 1), 1e-9)
    for name, result in results.items():
        rate = result["tokens"] / result["seconds"]
        per_million = result["cpu_cores"] / (rate / 1e6) if rate else float("nan")
        print(
            f"| {name} | {rate:,.0f} | {ratio_cell(ours, rate, own_row=name == 'stoker')} | {result['tokens'] / result['positions']:.1%} | "
            f"{result['cpu_cores']:.2f} | {per_million:.2f} | {result['peak_mb']:,.0f} MB |"
        )
    for name in ("tokenizer alone (the tokenizers package)", "tokenizer alone (stoker's native copy)"):
        if ours and name in results:
            ceiling = results[name]["tokens"] / results[name]["seconds"]
            print(f"stoker / {name}: {ours / ceiling:.1%}")


if __name__ == "__main__":
    main()
