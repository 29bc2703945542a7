"""Sequence packing: tokenized documents into rows of a context length, padding only at row ends.

The Data Journey paper's padding tax: Alpaca-like documents (mean 95 tokens) padded to 4,096
positions leave 97.7% of the batch as padding; packing many documents per row recovers it. Each
batch carries what variable-length attention needs to keep documents apart: position ids that
restart at every document, ``segment_ids`` per row and ``cu_seqlens`` over the flattened batch.
The packing loop runs in the Rust core.

Strategies: ``"greedy"`` (the next document goes into the current row if it fits, else the row is
closed: streaming, in order) and ``"best_fit"`` (documents are collected in a window and placed
longest first into the row they fill most tightly; a few emptier rows stay open for the next
window). Documents longer than the context are split into context-sized pieces (positions restart
in each piece), truncated, or dropped. With ``split_across_rows`` a document that does not fit is
cut to fill the row and continues in the next one (100% fill, documents cross rows).

Exact resume: `SequencePacker.state_dict` describes everything not yet delivered as
(document, start, length) pieces plus the count of documents consumed; `load_state_dict`
rebuilds it from the same token source, so no token is lost or repeated across a restart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._native import TokenPacker
from ..errors import ConfigurationError, DecodeError, ProvenanceError

__all__ = ["PER_BATCH_KEPT", "EfficiencyReport", "PackedBatch", "SequencePacker", "as_token_array"]

_UINT32_MAX = np.iinfo(np.uint32).max


@dataclass
class PackedBatch:
    """One batch of packed rows (``rows x context``).

    Attributes:
        input_ids: int64 tokens; padding is ``pad_id``.
        position_ids: int32, restarting at 0 at every document (piece).
        segment_ids: int32, 1, 2, ... for the documents of a row; 0 for padding.
        loss_mask: bool, True on real tokens.
        cu_seqlens: int32 cumulative lengths over the flattened batch, one segment per document
            piece and one per row's padding tail (its last entry is rows x context).
        segments: int64 ``[n, 4]``: (row, document id, start token, length) of every piece, so
            every token can be traced to its source document.
        real_tokens: Non-padding positions.
    """

    input_ids: np.ndarray
    position_ids: np.ndarray
    segment_ids: np.ndarray
    loss_mask: np.ndarray
    cu_seqlens: np.ndarray
    segments: np.ndarray
    real_tokens: int

    @property
    def positions(self) -> int:
        return int(self.input_ids.size)

    @property
    def efficiency(self) -> float:
        """Real tokens / positions."""
        return self.real_tokens / self.positions if self.positions else 0.0

    @property
    def max_seqlen(self) -> int:
        """Longest segment, as variable-length attention kernels ask for."""
        return int(np.diff(self.cu_seqlens).max()) if len(self.cu_seqlens) > 1 else 0


PER_BATCH_KEPT = 1024
"""Batches whose efficiency `EfficiencyReport.per_batch` keeps (the latest): a report, and the
state that carries it, stay the same size however long the run."""


@dataclass
class EfficiencyReport:
    """Real tokens over positions, per batch (the latest `PER_BATCH_KEPT`) and overall, for the
    observability layer."""

    batches: int = 0
    positions: int = 0
    real_tokens: int = 0
    per_batch: deque[float] = field(default_factory=lambda: deque(maxlen=PER_BATCH_KEPT))
    documents: int = 0
    empty_documents: int = 0
    tokens_dropped: int = 0

    @property
    def efficiency(self) -> float:
        return self.real_tokens / self.positions if self.positions else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "positions": self.positions,
            "real_tokens": self.real_tokens,
            "efficiency": self.efficiency,
            "per_batch": list(self.per_batch),
            "documents": self.documents,
            "empty_documents": self.empty_documents,
            "tokens_dropped": self.tokens_dropped,
        }


def as_token_array(tokens: Any, document: object = "?") -> np.ndarray:
    """``tokens`` as a 1-D uint32 array, refusing what cannot be token ids.

    Raises:
        TypeError: Not an integer sequence.
        DecodeError: Not 1-D, a negative id, or an id beyond uint32; the message names the document.
    """
    array = np.asarray(tokens)
    if array.size == 0:
        return np.zeros(0, dtype=np.uint32)
    if array.ndim != 1:
        raise DecodeError(f"document {document}: tokens must be 1-D, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"document {document}: tokens must be integers, got {array.dtype}")
    if array.dtype != np.uint32:
        low, high = int(array.min()), int(array.max())
        if low < 0 or high > _UINT32_MAX:
            raise DecodeError(f"document {document}: token id {low if low < 0 else high} is outside 0..{_UINT32_MAX}")
        array = array.astype(np.uint32)
    return np.ascontiguousarray(array)


def _check_packer_state(state: Any, plan_size: int | None) -> None:
    """Refuse, naming the part, a packer state whose parts are not of their kinds or whose
    numbers are out of range: a state is input (another version's, damaged, or hostile), and it
    must fail here, not as an IndexError or a huge allocation inside the restore."""

    def whole(value: Any, low: int = 0, high: int = 1 << 63) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value < high

    def fail(part: str, value: Any) -> ProvenanceError:
        return ProvenanceError(f"packer state: {part} is not valid ({str(value)[:80]!r})")

    if not isinstance(state, dict):
        raise fail("the state", type(state).__name__)
    for part in ("context_length", "batch_size"):
        if not whole(state.get(part), 1):
            raise fail(part, state.get(part))
    if not whole(state.get("documents_consumed")) or (plan_size is not None and state["documents_consumed"] > plan_size):
        raise fail("documents_consumed", state.get("documents_consumed"))
    if not isinstance(state.get("options"), dict) or not isinstance(state.get("report"), dict):
        raise fail("options or report", type(state.get("options")).__name__)
    packer = state.get("packer")
    if not isinstance(packer, dict) or not isinstance(packer.get("counters"), dict):
        raise fail("packer", type(packer).__name__)
    rows: tuple[Any, Any] = packer.get("ready"), packer.get("open")
    if not all(isinstance(group, list) and all(isinstance(row, list) for row in group) for group in rows):
        raise fail("packer rows", rows)
    if not isinstance(packer.get("pending"), list):
        raise fail("packer pending", packer.get("pending"))
    documents = state["documents_consumed"]
    pieces = [piece for group in rows for row in group for piece in row] + list(packer["pending"])
    for piece in pieces:
        if not (isinstance(piece, (list, tuple)) and len(piece) == 3 and all(whole(value, 0, 1 << 32) for value in piece)):
            raise fail("a piece (document, start, length)", piece)
        if piece[0] >= documents or piece[2] > state["context_length"]:
            raise fail(f"piece {list(piece)} (documents consumed: {documents})", piece)


class SequencePacker:
    """Packs a stream of documents into batches of ``batch_size`` rows of ``context_length``.

    Args:
        context_length: Positions per row.
        batch_size: Rows per batch.
        strategy: ``"best_fit"`` (default) or ``"greedy"``.
        window: Documents per best-fit window.
        long_documents: ``"split"``, ``"truncate"`` or ``"drop"`` for documents longer than a row.
        split_across_rows: Cut documents to fill rows completely.
        pad_id: Token id of padding.
        drop_last: Drop the final batch when it has fewer rows than ``batch_size``.
    """

    def __init__(
        self,
        context_length: int,
        batch_size: int,
        *,
        strategy: str = "best_fit",
        window: int = 1024,
        long_documents: str = "split",
        split_across_rows: bool = False,
        pad_id: int = 0,
        drop_last: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be positive, got {batch_size}")
        self.context_length = context_length
        self.batch_size = batch_size
        self.pad_id = pad_id
        self.drop_last = drop_last
        self._options = {"strategy": strategy, "window": window, "long_documents": long_documents, "split_across_rows": split_across_rows}
        self._packer = TokenPacker(context_length, strategy, window, long_documents, split_across_rows)
        self.documents_consumed = 0
        self.report = EfficiencyReport()

    def add(self, tokens: Any) -> None:
        """Add the next document (its id is its position in the stream)."""
        array = as_token_array(tokens, self.documents_consumed)
        self._packer.push_many(array, np.array([len(array)], dtype=np.uint64), self.documents_consumed)
        self.documents_consumed += 1

    def add_many(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Add documents stored back to back in ``tokens`` with sizes ``lengths`` (fastest path).

        Raises:
            DecodeError: A negative length, lengths that do not add up, or a bad token id.
        """
        lengths = np.asarray(lengths)
        if lengths.size and int(lengths.min()) < 0:
            bad = int(np.argmax(lengths < 0))
            raise DecodeError(f"document {self.documents_consumed + bad}: negative length {int(lengths[bad])}")
        array = as_token_array(tokens, f"{self.documents_consumed}..{self.documents_consumed + len(lengths) - 1}")
        # Each length within the tokens first: a sum of uint64 lengths wraps around past 2^64.
        if (lengths.size and int(lengths.max()) > len(array)) or int(lengths.sum()) != len(array):
            raise DecodeError(
                f"documents {self.documents_consumed}..{self.documents_consumed + len(lengths) - 1}: "
                f"lengths add up to {sum(int(length) for length in lengths)}, tokens holds {len(array)}"
            )
        self._packer.push_many(array, lengths.astype(np.uint64), self.documents_consumed)
        self.documents_consumed += len(lengths)

    def batches(self, *, final: bool = False) -> Iterator[PackedBatch]:
        """Yield every full batch ready now; with ``final``, close all rows and yield the rest."""
        if final:
            self._packer.finish()
        self._sync_counters()
        while self._packer.ready_rows >= self.batch_size or (final and self._packer.ready_rows and not self.drop_last):
            raw = self._packer.take_batch(self.batch_size, self.pad_id)
            if raw is None:
                return
            batch = PackedBatch(
                input_ids=raw["input_ids"],
                position_ids=raw["position_ids"],
                segment_ids=raw["segment_ids"],
                loss_mask=raw["loss_mask"].view(bool),
                cu_seqlens=raw["cu_seqlens"],
                segments=raw["segments"],
                real_tokens=int(raw["real_tokens"]),
            )
            self._record(batch)
            yield batch

    def pack(self, documents: Iterable[Any]) -> Iterator[PackedBatch]:
        """Add every document of ``documents`` and yield batches as they fill, then the rest."""
        for document in documents:
            self.add(document)
            if self._packer.ready_rows >= self.batch_size:
                yield from self.batches()
        yield from self.batches(final=True)

    def _record(self, batch: PackedBatch) -> None:
        report = self.report
        report.batches += 1
        report.positions += batch.positions
        report.real_tokens += batch.real_tokens
        report.per_batch.append(batch.efficiency)

    def _sync_counters(self) -> None:
        counters = self._packer.counters
        self.report.documents = counters["documents"]
        self.report.empty_documents = counters["empty_documents"]
        self.report.tokens_dropped = counters["tokens_dropped"]

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: plain data, JSON-serializable."""
        return {
            "version": 1,
            "context_length": self.context_length,
            "batch_size": self.batch_size,
            "options": dict(self._options),
            "documents_consumed": self.documents_consumed,
            "packer": self._packer.state(),
            "report": self.report.as_dict(),
        }

    def load_state_dict(self, state: dict[str, Any], fetch: Callable[[int], Any], *, plan_size: int | None = None) -> None:
        """Continue from ``state``; ``fetch(document_id)`` returns that document's tokens again.

        Args:
            state: What `state_dict` returned.
            fetch: A document's tokens by its id.
            plan_size: Where documents come from a plan: how many it holds (ids past it are
                refused by name).

        Raises:
            ProvenanceError: Not a packer state (a part missing or of the wrong kind, an id or size out
                of range: named), a state from a packer with other settings, or a fetched
                document that no longer matches the saved pieces.
        """
        _check_packer_state(state, plan_size)
        if state.get("version") != 1:
            raise ProvenanceError(f"packer state version {state.get('version')} is not 1")
        if (state["context_length"], state["batch_size"], state["options"]) != (self.context_length, self.batch_size, self._options):
            raise ProvenanceError("the state was saved by a packer with other settings")

        def piece(document: int, start: int, length: int) -> list[int]:
            tokens = as_token_array(fetch(document), document)
            if start + length > len(tokens):
                raise ProvenanceError(f"document {document} has {len(tokens)} tokens; the saved piece needs {start + length}")
            return tokens[start : start + length].tolist()

        saved_packer = state["packer"]  # tuples come back as lists from JSON
        self._packer.restore(
            {
                "ready": [[tuple(piece) for piece in row] for row in saved_packer["ready"]],
                "open": [[tuple(piece) for piece in row] for row in saved_packer["open"]],
                "pending": [tuple(piece) for piece in saved_packer["pending"]],
                "counters": saved_packer["counters"],
            },
            piece,
        )
        self.documents_consumed = int(state["documents_consumed"])
        saved = state["report"]
        self.report = EfficiencyReport(
            **{key: saved[key] for key in ("batches", "positions", "real_tokens", "documents", "empty_documents", "tokens_dropped")},
            per_batch=deque(saved["per_batch"][-PER_BATCH_KEPT:], maxlen=PER_BATCH_KEPT),
        )
