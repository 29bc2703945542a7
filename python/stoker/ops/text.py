"""Raw text to token ids: the document's text out of its stored bytes, then a tokenizer.

Two steps per document, both in the pipeline's threads:

1. `document_text`: a stored sample's bytes to its text. A JSON line (JSONL corpora, WebDataset
   ``.json`` members) gives its ``field``; anything else is UTF-8 text (Parquet string columns,
   ``.txt`` members). A line that is not JSON, lacks the field, or is not UTF-8 is a
   `CorruptSampleError` naming what is wrong, so the failure policy can name the document.
2. `Tokenizer.encode`: many texts at once through Hugging Face ``tokenizers`` (any
   ``tokenizer.json``; its batch encode runs in Rust with the GIL released) or a ``tiktoken``
   encoding, with the beginning and end of document marks added here, the same for both. A
   ``tokenizer.json`` is checked before it is loaded, and its truncation and padding are turned
   off: documents are whole (`_tokenizer_file`). `Tokenizer.encode_each` leaves out, by itself,
   a text the tokenizer fails on.

The ids come back as one flat ``uint32`` array plus lengths, what `SequencePacker.add_many`
takes without another copy.
"""

from __future__ import annotations

import array
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._bounded import MAX_DOCUMENT_BYTES, parse_json
from ..errors import ConfigurationError, CorruptSampleError, NativePanicError
from ._native_tokenizer import NativeTokenizer
from ._tokenizer_file import check_loaded, for_documents, is_rust_panic, load_tokenizer_file

__all__ = ["Tokenizer", "document_text"]


def document_text(data: bytes, field: str | None, name: str) -> str:
    """The text of one stored document.

    Args:
        data: The sample's bytes.
        field: The JSON field holding the text (a dotted path reaches inside objects); None:
            the bytes are the text itself.
        name: The document, for messages (``file:line``, a shard member, a Parquet row).

    Raises:
        CorruptSampleError: Not UTF-8, not JSON (or nested too deep to read), no such field, or
            a field that is not text.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptSampleError(f"{name}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    if field is None:
        return text
    try:
        # A line of 2 KB nested 1,000 deep, or a number of 5,000 digits: a bad document, not the
        # end of the epoch.
        value: Any = parse_json(text, name, max_bytes=MAX_DOCUMENT_BYTES)
    except ValueError as error:
        raise CorruptSampleError(f"{name}: not a JSON object ({str(error).removeprefix(f'{name}: ')})") from None
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            raise CorruptSampleError(f"{name}: no field {field!r} in the JSON object")
        value = value[part]
    if not isinstance(value, str):
        raise CorruptSampleError(f"{name}: field {field!r} is {type(value).__name__}, not text")
    return value


class Tokenizer:
    """A tokenizer that turns many documents into token ids at once, without the GIL.

    Args:
        tokenizer: A ``tokenizer.json`` path, a ``tokenizers.Tokenizer``, a Hugging Face
            ``transformers`` fast tokenizer (its Rust tokenizer is used), or a
            ``tiktoken.Encoding``.
        bos: Token put before every document: an id or the token's text (looked up in the
            vocabulary); None: none.
        eos: Token put after every document (GPT-style training separates documents with
            ``<|endoftext|>``); None: none.
        add_special_tokens: Let a Hugging Face tokenizer's own post-processor add its special
            tokens too (e.g. Llama's BOS); off by default, as ``bos`` and ``eos`` say it here.

    A Hugging Face tokenizer's truncation and padding are turned off (on a copy; one INFO line
    says so): each document is tokenized whole.

    Raises:
        ConfigurationError: Not a tokenizer this understands, one whose normalizers can grow a
            text past the limit (64 times, the worst case of each multiplied), or a
            ``bos``/``eos`` text that is not in the vocabulary.
        FileNotFoundError: A path that does not exist.
        StorageError: A path that is not a regular file, or a file over 1 GiB.
    """

    def __init__(
        self,
        tokenizer: str | os.PathLike[str] | Any,
        *,
        bos: int | str | None = None,
        eos: int | str | None = None,
        add_special_tokens: bool = False,
    ) -> None:
        path = None
        if isinstance(tokenizer, (str, os.PathLike)):
            path = Path(tokenizer)
            if not path.exists():
                raise FileNotFoundError(f"{path}: no such tokenizer file")
            tokenizer = load_tokenizer_file(path)  # checked before it is loaded
        backend: Any = getattr(tokenizer, "backend_tokenizer", tokenizer)  # transformers' fast tokenizers
        self.kind = _kind(backend)
        self.name = _name(backend)
        self._shown = str(path) if path is not None else self.name  # what messages call it
        if self.kind == "huggingface":
            if path is None:  # loaded by the caller: checked before anything is encoded with it
                check_loaded(backend, self._shown)
            backend = for_documents(backend, self._shown, own=path is not None)
        self.tokenizer: Any = backend
        self.add_special_tokens = add_special_tokens
        self.bos = self._token_id(bos, "bos")
        self.eos = self._token_id(eos, "eos")
        self._native = self._native_copy()

    def _token_id(self, token: int | str | None, role: str) -> int | None:
        if token is None or isinstance(token, int):
            return token
        if self.kind == "huggingface":
            found = self.tokenizer.token_to_id(token)
        else:
            found = self.tokenizer._special_tokens.get(token)  # tiktoken keeps its special tokens there
        if found is None:
            raise ConfigurationError(f"{role}={token!r} is not a token of {_name(self.tokenizer)}")
        return int(found)

    @property
    def parallel_inside(self) -> bool:
        """Whether one `encode` call already uses every core: a Hugging Face tokenizer with its
        thread pool on (``TOKENIZERS_PARALLELISM`` unset or true, read as the library reads
        it). Then one thread calling it is fastest (measured: 1 thread 1.34x 2 threads on 2
        cores); otherwise a thread per core."""
        if self.kind != "huggingface":
            return False
        setting = os.environ.get("TOKENIZERS_PARALLELISM")
        return setting is None or setting.strip().lower() not in ("", "off", "false", "f", "no", "n", "0")

    def describe(self) -> dict[str, Any]:
        """What the tokenizer is, for fingerprints and reports: kind, name, vocabulary size,
        bos and eos."""
        vocabulary = self.tokenizer.get_vocab_size() if self.kind == "huggingface" else self.tokenizer.n_vocab
        return {"kind": self.kind, "name": self.name, "vocabulary": int(vocabulary), "bos": self.bos, "eos": self.eos}

    def __getstate__(self) -> dict[str, Any]:
        # The native copy does not pickle (a Ray task, a spawned worker): it is made again there.
        return {name: value for name, value in self.__dict__.items() if name != "_native"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._native = self._native_copy()

    def _native_copy(self) -> NativeTokenizer | None:
        if self.kind != "huggingface":
            return None
        try:
            return NativeTokenizer(self.tokenizer, self.add_special_tokens, self.bos, self.eos, self._package_encode)
        except Exception as error:  # the package itself fails on the probes' plain text
            raise ConfigurationError(f"{self._shown}: a tokenizer that fails on plain text ({error})") from None

    @property
    def implementation(self) -> str:
        """Which code turns text into ids, and why: the native core's copy of a Hugging Face
        tokenizer (once it gave the package's ids), the ``tokenizers`` package, or tiktoken."""
        return self._native.reason if self._native is not None else "tiktoken"

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of ``texts``: (ids back to back as ``uint32``, one length per text).

        Rust without the GIL does the work. A Hugging Face tokenizer runs in the native core's
        copy of it (`implementation` says whether), which writes every document's ids into one
        array; the ``tokenizers`` package gives the same ids but one Python list per document,
        about 8% more time. Either spreads one call over its thread pool (every core, unless
        ``TOKENIZERS_PARALLELISM`` turns it off: see `parallel_inside`); a tiktoken call runs on
        the calling thread.
        """
        if self._native is not None:
            return self._native.encode(texts)
        return self._package_encode(texts)

    def encode_each(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
        """`encode`, with each text the tokenizer fails on left out by itself: (ids back to back,
        one length per text, 0 for a failed one, and ``{position: why}`` of the failed ones).

        The texts are encoded together as `encode` does; only when that call fails are they
        encoded one by one, to tell which fail (a regex that gives up on one text, a panic the
        native code caught, an error of the ``tokenizers`` package).
        """
        try:
            ids, lengths = self.encode(texts)
            return ids, lengths, {}
        except Exception:  # which text? asked of each below
            pass
        pieces: list[np.ndarray] = []
        lengths = np.zeros(len(texts), np.int64)
        failed: dict[int, str] = {}
        for position, text in enumerate(texts):
            try:
                ids, length = self.encode([text])
            except Exception as error:
                failed[position] = f"the tokenizer failed on it: {type(error).__name__}: {error}"
                continue
            pieces.append(ids)
            lengths[position] = length[0]
        return (np.concatenate(pieces) if pieces else np.zeros(0, np.uint32)), lengths, failed

    def _package_encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`encode` through the Python package (tokenizers or tiktoken).

        Raises:
            NativePanicError: The ``tokenizers`` package panicked (its ``PanicException``).
        """
        if self.kind == "huggingface":
            try:
                encodings = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=self.add_special_tokens)
            except BaseException as error:
                if not is_rust_panic(error):
                    raise
                raise NativePanicError(
                    f"tokenizer {self._shown}: the tokenizers package panicked on one of {len(texts)} texts: {error}"
                ) from None
            ids = [encoding.ids for encoding in encodings]
        else:
            ids = self.tokenizer.encode_ordinary_batch(list(texts), num_threads=1)
        extra = (self.bos is not None) + (self.eos is not None)
        lengths = np.fromiter((len(document) + extra for document in ids), dtype=np.int64, count=len(ids))
        # array.array's extend copies a list of ints in one C loop: 1.5x numpy slice assignment
        # per document, 1.7x one flat list (measured on 1,024 web documents).
        flat = array.array("I")
        for document in ids:
            if self.bos is not None:
                flat.append(self.bos)
            flat.extend(document)
            if self.eos is not None:
                flat.append(self.eos)
        return (np.frombuffer(flat, dtype=np.uint32) if flat else np.zeros(0, np.uint32)), lengths


def _kind(tokenizer: Any) -> str:
    if hasattr(tokenizer, "encode_batch_fast") and hasattr(tokenizer, "token_to_id"):
        return "huggingface"
    if hasattr(tokenizer, "encode_ordinary_batch") and hasattr(tokenizer, "n_vocab"):
        return "tiktoken"
    raise ConfigurationError(
        f"{type(tokenizer).__name__} is not a tokenizer stoker can use: give a tokenizer.json path, a tokenizers.Tokenizer, "
        "a transformers fast tokenizer or a tiktoken.Encoding"
    )


def _name(tokenizer: Any) -> str:
    name = getattr(tokenizer, "name", None)
    if isinstance(name, str):
        return name
    model = getattr(tokenizer, "model", None)
    return f"{type(model).__name__} tokenizer" if model is not None else type(tokenizer).__name__
