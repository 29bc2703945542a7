"""A small raw text corpus and a tokenizer trained on it, for the text tests (no download)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from stoker.bench import EOS, corpus_documents, train_tokenizer

__all__ = ["EOS", "make_corpus", "write_lines"]


def write_lines(path: Path, lines: list[str], compression: str | None = None) -> Path:
    """``lines`` joined by newlines into ``path`` (plain, ``"gzip"`` or ``"zstd"``)."""
    data = ("\n".join(lines) + "\n").encode()
    if compression == "gzip":
        data = gzip.compress(data)
    elif compression == "zstd":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def make_corpus(folder: Path, documents: int = 400, files: int = 3, seed: int = 0) -> tuple[list[str], Path]:
    """``documents`` web-like texts as ``{"text": ...}`` lines spread over ``files`` JSON Lines
    files in ``folder`` (the first plain, then gzip, then zstd), and a tokenizer.json trained on
    them. Returns (the texts in storage order, the tokenizer's path)."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = list(corpus_documents(documents, seed=seed, median_words=60))
    per_file = -(-documents // files)
    kinds = [(".jsonl", None), (".jsonl.gz", "gzip"), (".jsonl.zst", "zstd")]
    for number in range(files):
        suffix, compression = kinds[number % len(kinds)]
        lines = [json.dumps({"text": text}) for text in texts[number * per_file : (number + 1) * per_file]]
        write_lines(folder / f"part-{number:03d}{suffix}", lines, compression)
    tokenizer = train_tokenizer(folder.parent / f"{folder.name}-tokenizer.json", texts[:200], vocabulary=1000)
    return texts, tokenizer
