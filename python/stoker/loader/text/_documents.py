"""Raw text documents in a storage, tokenized as they are read: the text side of `TokenLoader`.

A text corpus is any `Storage` whose samples are documents: JSON Lines files (`JsonlStorage`,
plain, gzip or zstd), a Parquet string column (FineWeb's ``text``, local or ``s3://``), or
WebDataset shards' ``.txt``/``.json`` members. `open_text` picks the storage and says how a
document's bytes become text. `TextDocuments` reads and tokenizes a run of documents at once:
what the pipeline's stages call, and what a resume calls to rebuild the packer's unfinished rows
(a document read twice tokenizes to the same ids, so a resume is exact).

A document that cannot be read or turned into text is reported, not hidden: its slot comes back
as a failure (stage and reason) with no tokens, and the loader applies its `FailurePolicy`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigurationError, CorruptSampleError, StorageError
from ...ops.text import Tokenizer, document_text
from ...storage import Storage, has_blocks, open_storage, storage_format
from ...storage.local import TarShardStorage

__all__ = ["TextChunk", "TextDocuments", "open_text"]


def open_text(source: str | os.PathLike[str] | Storage, field: str = "text", **options: Any) -> tuple[Storage, str | None]:
    """The storage of a text corpus, and the JSON field of its documents (None: raw text).

    Args:
        source: A path or URL (JSON Lines files, Parquet files local or ``s3://``, tar shards),
            or a storage already open (its samples are JSON documents when it is a
            `JsonlStorage`, raw text otherwise).
        field: The JSON field of the text (JSON Lines, ``.json`` members), or the Parquet
            column; a dotted path reaches inside a JSON object.
        options: Passed to the storage's constructor.

    Raises:
        StorageError: A dataset that holds no text (no string column, no ``.txt``/``.json``
            member).
        FileNotFoundError: Nothing at ``source``.
    """
    from ...storage.local import JsonlStorage

    if isinstance(source, Storage):
        return source, field if isinstance(source, JsonlStorage) else None
    text = str(source)
    kind = "parquet" if text.startswith("s3://") else storage_format(text)
    if kind == "parquet":
        return open_storage(text, image_column=field, label_column="", **options), None
    if kind == "jsonl":
        return JsonlStorage(text, **options), field
    if kind == "shards":
        for member, member_field in (("txt", None), ("json", field)):
            shards = TarShardStorage(text, payload=member, **options)
            if member in shards.catalog.payload_counts():
                return shards, member_field
        raise StorageError(f"{text}: tar shards without text members (.txt, or .json with a {field!r} field)")
    raise StorageError(f"{text}: not a text corpus stoker reads (JSON Lines, Parquet with a text column, or tar shards of .txt/.json)")


@dataclass
class TextChunk:
    """A run of documents, read and tokenized.

    Attributes:
        tokens: Their token ids back to back (``uint32``).
        lengths: Tokens per document (0 for a failed one).
        failed: ``{slot: (stage, reason)}`` of the documents that could not be read
            (``"read"``), turned into text or tokenized (``"tokenize"``).
        text_bytes: Bytes of text that were tokenized.
    """

    tokens: np.ndarray
    lengths: np.ndarray
    failed: dict[int, tuple[str, str]]
    text_bytes: int


# A tokenizer holds about 130 bytes per byte of text while it works (an 8 MB document took
# 1.08 GB in one call), so one document's size is bounded: a larger one is a bad document.
MAX_DOCUMENT_BYTES = 4 << 20


class TextDocuments:
    """Raw text documents of a storage, read and tokenized together.

    Args:
        storage: Where the documents are.
        tokenizer: Turns text into ids.
        field: The JSON field holding the text, or None where a document's bytes are its text.
        max_document_bytes: A stored document larger than this (its bytes as stored, JSON
            included) is a bad document, named, before it is parsed or tokenized.

    Raises:
        ValueError: ``max_document_bytes`` below 1.
    """

    def __init__(self, storage: Storage, tokenizer: Tokenizer, field: str | None, max_document_bytes: int = MAX_DOCUMENT_BYTES) -> None:
        if max_document_bytes < 1:
            raise ConfigurationError(f"max_document_bytes must be positive, got {max_document_bytes}")
        self.storage = storage
        self.tokenizer = tokenizer
        self.field = field
        self.max_document_bytes = max_document_bytes

    def __len__(self) -> int:
        return len(self.storage)

    def name(self, index: int) -> str:
        """Where document ``index`` is (``file:line``, a Parquet row, a shard member)."""
        namer = getattr(self.storage, "sample_name", None)
        return str(namer(index)) if namer is not None else f"{self.storage.describe()}: {self.storage.keys[index]}"

    def block_sizes(self) -> list[int] | None:
        """The storage's blocks (see `BlockStorage`), or None."""
        return self.storage.block_sizes() if has_blocks(self.storage) else None  # type: ignore[attr-defined]

    def read_texts(self, indices: Sequence[int]) -> tuple[list[str], dict[int, tuple[str, str]], int]:
        """The texts of ``indices`` ("" for a failed one), the failures by slot, and the bytes read."""
        raw = self.storage.try_read_indices(indices)
        texts: list[str] = []
        failed: dict[int, tuple[str, str]] = {}
        size = 0
        for slot, (index, data) in enumerate(zip(indices, raw)):
            if isinstance(data, BaseException):
                failed[slot] = ("read", f"{type(data).__name__}: {data}")
                texts.append("")
                continue
            if len(data) > self.max_document_bytes:
                failed[slot] = (
                    "read",
                    f"{self.name(index)}: a document of {len(data):,} bytes, over max_document_bytes={self.max_document_bytes:,}",
                )
                texts.append("")
                continue
            try:
                texts.append(document_text(data, self.field, self.name(index)))
                size += len(data)
            except CorruptSampleError as error:
                failed[slot] = ("tokenize", str(error))
                texts.append("")
        return texts, failed, size

    def tokenize(self, texts: list[str], failed: dict[int, tuple[str, str]], size: int) -> TextChunk:
        """Token ids of ``texts``; the ``failed`` slots get none, nor do the texts the tokenizer
        fails on (added to ``failed``, stage ``"tokenize"``)."""
        good = [slot for slot in range(len(texts)) if slot not in failed]
        tokens, good_lengths, broken = self.tokenizer.encode_each([texts[slot] for slot in good] if failed else texts)
        for position, why in broken.items():
            failed[good[position]] = ("tokenize", why)
        if not failed:
            return TextChunk(tokens, good_lengths, failed, size)
        lengths = np.zeros(len(texts), np.int64)
        lengths[good] = good_lengths
        return TextChunk(tokens, lengths, failed, size)

    def chunk(self, indices: Sequence[int]) -> TextChunk:
        """Read and tokenize ``indices`` in one go."""
        return self.tokenize(*self.read_texts(indices))

    def documents(self, indices: Sequence[int]) -> list[np.ndarray]:
        """Each document's tokens (none for one that fails): what a resume fetches again."""
        chunk = self.chunk(indices)
        return np.split(chunk.tokens, np.cumsum(chunk.lengths)[:-1]) if len(indices) else []
