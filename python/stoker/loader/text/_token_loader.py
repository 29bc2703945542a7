"""`TokenLoader`: documents -> packed batches, shuffled per epoch, sharded by rank, exactly
resumable with the packer's remainder and window in its state.

Documents come tokenized (token files and shards), or as raw text tokenized on the fly: JSON
Lines, Parquet text columns, WebDataset ``.txt``/``.json`` members (`_documents.py`). Raw text runs
through a pipeline of two stages, each with its own concurrency (``read``: the storage's reads and
the text out of each document; ``tokenize``: the tokenizer, in Rust without the GIL), in order, so
the packer sees the same documents in the same order whatever the concurrency."""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from ..._bounded import shown_logger
from ..._deprecation import warn_deprecated
from ...distributed import StepAgreement, discover_world, process_group
from ...errors import ConfigurationError, ProvenanceError
from ...ops.packing import PackedBatch, SequencePacker
from ...ops.text import Tokenizer
from ...pipeline import Pipeline, PipelineBuilder
from ...sampling import LengthBuckets, Sampler
from ...storage import Storage
from .._failure_policy import BadSampleHandler
from .._options import FailurePolicy
from ..state import require_parts
from ._documents import MAX_DOCUMENT_BYTES, TextChunk, TextDocuments, open_text
from ._length_batches import LengthBatches
from ._stats import TextStats

__all__ = ["TokenLoader"]

_logger = shown_logger("stoker.loader")


class TokenSource(Protocol):
    """What `stoker.storage.open_tokens` returns."""

    def __len__(self) -> int: ...

    def documents(self, indices: Sequence[int]) -> list[np.ndarray]: ...


class TokenLoader:
    """Packed batches of ``batch_size`` rows of ``context_length`` tokens.

    Documents are taken in the sampler's order for this rank (a seeded shuffle per epoch; the
    block shuffle where the storage reads in blocks, as raw text corpora do), read
    ``read_ahead`` at a time, tokenized where they are raw text, and packed. A document's id
    inside the packer is its position in this rank's plan, so `state_dict` (documents handed to
    the packer, plus the packer's unfinished rows and window as document pieces) resumes
    exactly, mid-document and mid-shard.

    Args:
        source: Tokenized documents (`TokenFile`, `TokenShards`), or with ``tokenizer`` raw
            text: a path or URL (JSON Lines ``.jsonl``/``.gz``/``.zst``, Parquet local or
            ``s3://``, tar shards with ``.txt`` or ``.json`` members) or an open `Storage`.
        context_length: Tokens per row.
        batch_size: Rows per batch.
        tokenizer: Raw text only: a `stoker.ops.Tokenizer`, or what it takes (a
            ``tokenizer.json`` path, a ``tokenizers.Tokenizer``, a ``tiktoken.Encoding``).
        text_field: Raw text only: the JSON field (JSON Lines, ``.json`` members; a dotted path
            reaches inside) or the Parquet column holding each document's text.
        shuffle: Shuffle the documents per epoch, as `Sampler` does (ranks get equal document
            counts; padding documents are not repeated here: ``pad=False``).
        seed: Seeds the shuffle, with the epoch.
        rank: This process's rank; left out, found as for `Loader` (`Sampling`).
        world_size: How many ranks share the documents; left out, found as for `Loader`.
        read_ahead: Documents read per storage call (default 1024 tokenized, 256 raw text: a
            pipeline item).
        equal_steps: End every rank's epoch at the same step, the first where one rank has no
            batch left (`stoker.distributed.StepAgreement`: one small all-reduce a step), so
            DDP never waits on a step another rank does not take. None (default): on with
            several ranks and an initialized process group (several ranks without one: a
            warning); True: required (an error without a process group); False: off.
        failure_policy: Raw text only: what a document that cannot be read, is not text, or lacks its
            field does (`FailurePolicy`: ``"raise"``, or ``"skip"``, which leaves it out of the
            packed rows; every one is listed in `failures`).
        tokenize_concurrency: Raw text only: threads tokenizing at once (default: 1 where one
            call of the tokenizer already uses every core, a Hugging Face tokenizer with its
            thread pool on; else the cores this process may use).
        max_document_bytes: Raw text only: a document larger than this as stored is a bad
            document (named, handled by ``failure_policy``) before it is parsed or tokenized: a
            tokenizer holds about 130 bytes per byte of text while it works.
        buckets: Batch whole documents by length instead of packing them
            (`stoker.sampling.LengthBuckets` of token counts up to ``context_length``): each
            batch holds ``batch_size`` documents of one bucket, one a row, padded to the bucket's
            length (the shortest that holds the document; longer ones are cut to the longest,
            counted in `bucket_counts`), with every rank taking the same number of steps and an
            exact resume. Tokenized documents with their lengths only (a `TokenFile`).
        packer_options: Passed to `SequencePacker` (strategy, window, long_documents,
            split_across_rows, pad_id, drop_last).

    Raises:
        ConfigurationError: ``tokenizer`` without raw text, or options only raw text takes;
            ``FailurePolicy(on_error="zero")`` (a document has no slot to zero); buckets over
            raw text, without shuffling, or longer than ``context_length``.
    """

    def __init__(
        self,
        source: TokenSource | Storage | str | os.PathLike[str],
        *,
        context_length: int,
        batch_size: int,
        tokenizer: Tokenizer | str | os.PathLike[str] | Any | None = None,
        text_field: str = "text",
        shuffle: bool = True,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        read_ahead: int | None = None,
        equal_steps: bool | None = None,
        failure_policy: FailurePolicy | None = None,
        tokenize_concurrency: int | None = None,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        buckets: LengthBuckets | None = None,
        **packer_options: Any,
    ) -> None:
        if "failure" in packer_options:  # the old name, as the Loader's failures= was
            if failure_policy is not None:
                raise TypeError("give failure_policy= only (failure= is its old name)")
            warn_deprecated("TokenLoader(failure=...) is now TokenLoader(failure_policy=...)")
            failure_policy = packer_options.pop("failure")
        self.text: TextDocuments | None = None
        if tokenizer is not None:
            storage, field = open_text(source, text_field)  # type: ignore[arg-type]
            self.text = TextDocuments(
                storage, tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer(tokenizer), field, max_document_bytes
            )
            self.source: TokenSource = self.text
        elif isinstance(source, (Storage, str, os.PathLike)):
            raise ConfigurationError(
                "a raw text corpus needs tokenizer= (a tokenizer.json path, a tokenizers.Tokenizer, a tiktoken.Encoding)"
            )
        else:
            if failure_policy is not None or tokenize_concurrency is not None:
                raise ConfigurationError("failure_policy= and tokenize_concurrency= are for raw text (with tokenizer=)")
            self.source = source
        self.context_length = context_length
        self.batch_size = batch_size
        self.read_ahead = read_ahead or (256 if self.text is not None else 1024)
        if self.read_ahead < 1:
            raise ConfigurationError(f"read_ahead must be positive, got {read_ahead}")
        self.packer_options = packer_options
        self.failure_policy = failure_policy or FailurePolicy()
        if self.failure_policy.on_error == "zero":
            raise ConfigurationError('a text document has no slot to zero: use FailurePolicy(on_error="skip") or "raise"')
        self._bad = BadSampleHandler(self.failure_policy, _describe(source))
        parallel_inside = self.text is not None and self.text.tokenizer.parallel_inside
        self.tokenize_concurrency = tokenize_concurrency or (1 if parallel_inside else len(os.sched_getaffinity(0)))
        rank, world_size, _ = discover_world(rank, world_size)
        blocks = self.text.block_sizes() if self.text is not None and shuffle else None
        window = 32
        if self.text is not None and blocks:  # mix only as many blocks as the storage keeps open
            window = min(32, max(1, int(getattr(self.text.storage, "max_open_blocks", lambda: 32)())))
        self._length_batches: LengthBatches | None = None
        if buckets is not None:
            self._length_batches = self._bucketed(buckets, shuffle)
            self.sampler = Sampler(
                len(self.source),
                seed=seed,
                rank=rank,
                world_size=world_size,
                buckets=(self._length_batches.bucket_of, len(buckets)),
                batch_size=batch_size,
                leftovers=buckets.leftovers,
            )
        else:
            self.sampler = Sampler(
                len(self.source), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size, pad=False, blocks=blocks, window=window
            )
        # With buckets every rank's step count is equal by construction: nothing to agree on.
        self._agreement = None if buckets is not None else _step_agreement(equal_steps, world_size)
        self.ended_early = 0  # epochs this rank ended at the agreed last step with batches left
        self._pipeline: Pipeline[Any] | None = None
        self._counters = TextStats(raw_text=self.text is not None)
        self._new_packer()

    @property
    def failures(self) -> list[Any]:
        """Every bad document so far (`stoker.failures.Failure`: name, stage, reason, action)."""
        return self._bad.log.kept()

    def _bucketed(self, buckets: LengthBuckets, shuffle: bool) -> LengthBatches:
        """The length buckets' batching, checked against the other options."""
        if self.text is not None:
            raise ConfigurationError(
                "buckets by length need each document's length before the epoch, which raw text has only once tokenized: "
                "tokenize it into a token file first (stoker.ingest.write_token_file; docs/tokens.md, 'From raw text to "
                "length buckets') and give TokenFile('corpus.bin')"
            )
        return LengthBatches(
            self.source,
            buckets,
            batch_size=self.batch_size,
            context_length=self.context_length,
            shuffle=shuffle,
            pad_id=int(self.packer_options.get("pad_id", 0)),
        )

    def bucket_counts(self) -> dict[str, Any] | None:
        """With buckets, this epoch's: each bucket's ``length`` and ``samples``, the ``batches``
        dealt, ``left_over`` per bucket and the ``leftovers`` policy, ``without_bucket`` (empty
        documents), and ``cut``: documents longer than the longest bucket cut to it so far.
        None without buckets."""
        return None if self._length_batches is None else self._length_batches.report(self.sampler)

    def _new_packer(self) -> None:
        self.packer = SequencePacker(self.context_length, self.batch_size, **self.packer_options)
        self._plan = self.sampler.plan_arrays()
        if self._length_batches is not None:
            self._length_batches.taken = 0
        self._bad.start_epoch(self._plan.size)

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: a new document order and an empty packer."""
        self.sampler.set_epoch(epoch)
        self._new_packer()

    def __iter__(self) -> Iterator[PackedBatch]:
        """This rank's packed batches for the epoch; with an agreed last step, only as many as
        every rank has (a batch held back is not delivered: the state is as before it)."""
        batches = self._agreed_batches()
        started = time.perf_counter()
        try:
            for batch in batches:
                now = time.perf_counter()
                self._counters.delivered(batch.real_tokens, now - started)  # the consumer's time since the last one included
                started = now
                yield batch
            self._counters.delivered(0, time.perf_counter() - started)
        finally:
            batches.close()  # a break out of the loop stops the text pipeline now, not when collected

    def _agreed_batches(self) -> Generator[PackedBatch, None, None]:
        """`_batches`, ended at the step every rank agreed on where there is a vote."""
        if self._agreement is None:
            yield from self._batches()
            return
        batches = self._batches()
        while True:
            before = self.state_dict()
            batch = next(batches, None)
            if not self._agreement.all_have_a_batch(batch is not None):
                break
            assert batch is not None
            yield batch
        if batch is not None:
            batches.close()
            self.load_state_dict(before)  # the held-back batch was never delivered
            self.ended_early += 1
            _logger.warning(
                "rank %d: epoch %d ended at the step all %d ranks agreed on (another rank ran out of documents); "
                "this rank's remaining documents are not delivered this epoch (the state says so: a resume would offer them)",
                self.sampler.rank,
                self.sampler.epoch,
                self.sampler.world_size,
            )

    def _batches(self) -> Generator[PackedBatch, None, None]:
        if self._length_batches is not None:
            for batch in self._length_batches.batches(self._plan):
                self._counters.read(len(batch.input_ids))  # one document a row
                yield batch
            return
        if self.text is not None:
            yield from self._text_batches()
            return
        plan = self._plan
        while self.packer.documents_consumed < plan.size:
            start = self.packer.documents_consumed
            indices = plan.part(start, start + self.read_ahead).indices.tolist()
            documents = self.source.documents(indices)
            self._counters.read(len(documents))
            lengths = np.array([len(document) for document in documents], dtype=np.int64)
            tokens = np.concatenate(documents) if documents else np.zeros(0, np.uint32)
            self.packer.add_many(tokens, lengths)
            yield from self.packer.batches()
        yield from self.packer.batches(final=True)

    def _text_batches(self) -> Generator[PackedBatch, None, None]:
        """Raw text through the read and tokenize stages, in plan order, into the packer."""
        text = self.text
        assert text is not None
        plan, chunk = self._plan, self.read_ahead

        def read(start: int) -> tuple[int, Any]:
            try:
                return start, text.read_texts(plan.part(start, start + chunk).indices.tolist())
            except Exception as error:  # a dead store, a closed storage: raised in order, below
                return start, error

        def tokenize(item: tuple[int, Any]) -> tuple[int, TextChunk | Exception]:
            start, read_result = item
            if isinstance(read_result, Exception):
                return start, read_result
            try:
                return start, text.tokenize(*read_result)
            except Exception as error:
                return start, error

        pipeline = (
            PipelineBuilder()
            .add_source(range(self.packer.documents_consumed, plan.size, chunk), name="plan")
            .pipe(read, concurrency=2, name="read", output_order="input")
            .pipe(tokenize, concurrency=self.tokenize_concurrency, name="tokenize", output_order="input")
            .add_sink(2)
            .build(name="stoker-text")
        )
        self._pipeline = pipeline
        with pipeline.auto_stop():
            for start, result in pipeline:
                if isinstance(result, Exception):
                    raise result
                self._take(start, result)
                yield from self.packer.batches()
        yield from self.packer.batches(final=True)

    def _take(self, start: int, chunk: TextChunk) -> None:
        """Hand one tokenized chunk to the packer, its bad documents to the failure policy."""
        assert self.text is not None
        if chunk.failed:
            slots = sorted(chunk.failed)
            part = self._plan.part(start, start + len(chunk.lengths))
            self._bad.drop(
                {order: chunk.failed[slot] for order, slot in enumerate(slots)},
                epoch=self.sampler.epoch,
                keys=[self.text.name(int(part.indices[slot])) for slot in slots],
                positions=[int(part.positions[slot]) for slot in slots],
            )
        self.packer.add_many(chunk.tokens, chunk.lengths)
        self._counters.read(len(chunk.lengths), chunk.text_bytes)

    def stats(self) -> TextStats:
        """Documents read, tokens delivered and text bytes read by this loader so far (a resumed
        one counting from its resume), the rates, the packing efficiency, bad documents, and the
        text pipeline's per-stage figures (`TextStats`)."""
        return self._counters.snapshot(self.packer.report.efficiency, self._bad.log, self._pipeline)

    def diagnose(self, *, training_step: bool = True, contention: Any | None = None) -> Any:
        """The text pipeline's bottleneck in words (`stoker.observe.diagnose` over its stats), as
        for `Loader`: the stage closest to its capacity, why, and what to change.

        Args:
            training_step: Whether the loop does work of its own between batches (False: the
                loader was measured alone, and its slowest stage is named).
            contention: What the kernel says of the CPU over the run (`stoker.observe.CpuWatch`).

        Raises:
            RuntimeError: Before the first epoch of raw text (there is no pipeline to diagnose).
        """
        from ...observe import diagnose

        stats = self.stats()
        if stats.pipeline is None:
            raise RuntimeError("diagnose() needs a raw text epoch run first (tokenized documents have no pipeline)")
        return diagnose(
            stats.pipeline,
            cores=len(os.sched_getaffinity(0)),
            storage_facts={"bytes_read": stats.text_bytes, "tokens": stats.tokens},
            training_step=training_step,
            contention=contention,
        )

    def state_dict(self) -> dict[str, Any]:
        """Epoch, order and packer state, and what the documents are (their count; for raw text,
        the tokenizer); plain data."""
        state = {
            "version": 1,
            "sampler": self.sampler.state_dict(),
            "packer": self.packer.state_dict(),
            "documents": self._describe_documents(),
        }
        if self._length_batches is not None:
            state["taken"] = self._length_batches.taken
        return state

    def _describe_documents(self) -> dict[str, Any]:
        described: dict[str, Any] = {"count": len(self.source)}
        if self.text is not None:
            described["tokenizer"] = self.text.tokenizer.describe()
            described["field"] = self.text.field
            content = getattr(self.text.storage, "content_digest", None)
            if content is not None:  # the text itself, where the storage knows it (JSON Lines)
                described["content"] = content()
        return described

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict` (same world size).

        Raises:
            ValueError: Not a TokenLoader state (a part missing or of the wrong kind, named),
                another version, or a state saved over other documents, another tokenizer or
                other text (the message says which): its positions would mean other tokens.
        """
        if not isinstance(state, dict):
            raise ConfigurationError(f"not a TokenLoader state: expected the dict state_dict() returns, got {type(state).__name__}")
        if state.get("version") != 1:
            raise ConfigurationError(f"token loader state version {str(state.get('version'))[:40]} is not 1")
        # What its positions mean (documents) is as required as the positions: without it, a
        # state saved over other documents or another tokenizer would resume on other tokens.
        require_parts(state, {"sampler": dict, "packer": dict, "documents": dict}, "TokenLoader")
        saved = state["documents"]
        if saved != self._describe_documents():
            differences = [
                f"{name}: saved {str(saved.get(name))[:80]!r}, now {value!r}"
                for name, value in self._describe_documents().items()
                if saved.get(name) != value
            ]
            raise ProvenanceError(f"the state was saved over other documents ({'; '.join(differences)})")
        before = self.sampler.state_dict()
        self.sampler.load_state_dict(state["sampler"])
        try:
            self._new_packer()
            if self._length_batches is not None:
                self._length_batches.restore(state.get("taken"), self._plan)
            # A document split over several unfinished rows is read once, not once a piece.
            read: dict[int, np.ndarray] = {}
            started = time.perf_counter()
            self.packer.load_state_dict(
                state["packer"],
                plan_size=self._plan.size,
                fetch=lambda document: read[document] if document in read else read.setdefault(document, self._read_again(document)),
            )
            self._counters.seconds += time.perf_counter() - started  # the resume's reads are this loader's work
        except BaseException:
            self.sampler.load_state_dict(before)  # a refused state leaves the loader as it was
            self._new_packer()
            raise

    def _read_again(self, document: int) -> np.ndarray:
        """The tokens of this epoch's ``document`` (its place in the plan), read again to rebuild
        a resumed packer's unfinished rows: counted in `stats` as this loader's reads."""
        indices = self._plan.part(document, document + 1).indices.tolist()
        if self.text is None:
            self._counters.read(1)
            return self.source.documents(indices)[0]
        chunk = self.text.chunk(indices)
        self._counters.read(1, chunk.text_bytes)
        return chunk.tokens

    @property
    def report(self) -> Any:
        """The packer's efficiency report for this epoch."""
        return self.packer.report


def _describe(source: object) -> str:
    describe = getattr(source, "describe", None)
    return str(describe()) if callable(describe) else str(source)


def _step_agreement(equal_steps: bool | None, world_size: int) -> StepAgreement | None:
    """The vote that ends every rank's epoch at the same step, where one is needed and possible.

    Raises:
        RuntimeError: ``equal_steps=True`` with several ranks and no process group.
    """
    if world_size == 1 or equal_steps is False:
        return None
    if equal_steps is None and process_group() is None:
        _logger.warning(
            "TokenLoader: %d ranks and no torch.distributed process group: ranks may yield different numbers of batches "
            "(documents differ in length); under DDP initialize the process group before the loader, so they end together",
            world_size,
        )
        return None
    return StepAgreement()
