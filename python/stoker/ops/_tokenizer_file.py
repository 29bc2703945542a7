"""A Hugging Face tokenizer made fit to tokenize documents: its file checked before it is loaded,
and the settings that would change a document's tokens turned off.

A ``tokenizer.json`` is outside input. Three things in one were found to end or corrupt a run:

- **Growth and ids**: normalizers that rewrite the text many times over (eight ``Replace`` of
  the empty string aborted the process on a document of a few KB), and a token id of 10^9 (the
  package writes a vocabulary id by id up to its largest: its ``to_str`` ran for good). The
  native core checks the file before either tokenizer loads it
  (`stoker._native.check_tokenizer_json`: each normalizer's worst case multiplied, at most 64;
  ids up to ``MAX_TOKEN_ID``): loading already normalizes the added tokens.
- **Truncation and padding**: published files often carry both. Applied to each document, a
  truncation to 8 tokens delivered 320 of 1,800 tokens, and a padding delivered pad ids the loss
  mask counted. Here documents are whole: rows are the packer's (or the length buckets') to make.
  Both are turned off, on a copy of the tokenizer, with one INFO line saying so.
- **Panics**: the ``tokenizers`` package raises its Rust panics as ``PanicException``, which
  ``except Exception`` does not catch. `is_rust_panic` tells them apart, so they become
  `stoker.errors.NativePanicError`, a failure the failure policy handles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import _native
from .._bounded import read_regular, shown_logger
from ..errors import ConfigurationError

__all__ = ["MAX_TOKENIZER_BYTES", "check_limits", "check_loaded", "for_documents", "is_rust_panic", "load_tokenizer_file"]

_logger = shown_logger("stoker.text")  # a file's name and settings are outside text: shown escaped

# The largest tokenizer file read: published ones are up to a few tens of MB (a 256k vocabulary
# with its merges); a file past this is refused by name before it is read.
MAX_TOKENIZER_BYTES = 1 << 30


def is_rust_panic(error: BaseException) -> bool:
    """Whether ``error`` is a Rust panic another extension raised (pyo3's ``PanicException``)."""
    return type(error).__name__ == "PanicException"


def check_limits(json_text: str, name: str) -> None:
    """Refuse a tokenizer (its JSON) past the native core's limits: normalizers that can grow a
    text more than 64 times, a token id past ``MAX_TOKEN_ID``.

    Raises:
        ConfigurationError: Naming ``name`` and what is past the limit.
    """
    try:
        _native.check_tokenizer_json(json_text)
    except ValueError as error:
        raise ConfigurationError(f"{name}: refused as a tokenizer: {error}") from None


def check_loaded(backend: Any, name: str) -> None:
    """`check_limits` for a tokenizer the caller loaded: its ids first, from its vocabulary (its
    JSON is written id by id up to the largest, so a huge id would make ``to_str`` run for good),
    then its JSON.

    Raises:
        ConfigurationError: Naming ``name`` and what is past the limit.
    """
    vocabulary = backend.get_vocab(with_added_tokens=True) if hasattr(backend, "get_vocab") else {}
    largest = max(vocabulary.values(), default=0)
    if largest > _native.MAX_TOKEN_ID:
        raise ConfigurationError(f"{name}: refused as a tokenizer: a token id of {largest}, over the limit of {_native.MAX_TOKEN_ID}")
    check_limits(backend.to_str(), name)


def load_tokenizer_file(path: Path) -> Any:
    """The ``tokenizers.Tokenizer`` of the ``tokenizer.json`` at ``path``, checked before it is
    loaded.

    Raises:
        ConfigurationError: No ``tokenizers`` package, not UTF-8, over the limits, or not a file
            the package loads.
        StorageError: Not a regular file, or larger than `MAX_TOKENIZER_BYTES`.
    """
    try:
        from tokenizers import Tokenizer as HuggingFaceTokenizer
    except ImportError as error:
        raise ConfigurationError("a tokenizer.json needs the tokenizers package: pip install 'stoker[text]'") from error
    data = read_regular(path, limit=MAX_TOKENIZER_BYTES, what="a tokenizer file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigurationError(f"{path}: not UTF-8 text, so not a tokenizer.json ({error.reason} at byte {error.start})") from None
    check_limits(text, str(path))
    try:
        return HuggingFaceTokenizer.from_str(text)
    except BaseException as error:  # its own errors, and its panics (PanicException is no Exception)
        if not isinstance(error, Exception) and not is_rust_panic(error):
            raise
        raise ConfigurationError(f"{path}: not a tokenizer.json the tokenizers library can load ({error})") from None


def for_documents(backend: Any, name: str, *, own: bool) -> Any:
    """``backend`` (a ``tokenizers.Tokenizer``) without truncation and padding: itself when it has
    neither or is ``own`` (loaded here), else a copy with both turned off (the caller's object is
    left as it is), said in one INFO line.

    Raises:
        ConfigurationError: A caller's tokenizer that cannot be copied.
    """
    truncation = getattr(backend, "truncation", None)
    padding = getattr(backend, "padding", None)
    if truncation is None and padding is None:
        return backend
    if own:
        copy = backend
    else:
        try:
            copy = type(backend).from_str(backend.to_str())
        except Exception as error:  # what the package writes it cannot always read back (duplicate ids)
            raise ConfigurationError(
                f"{name}: a tokenizer that cannot be copied to turn its truncation and padding off ({error})"
            ) from None
    copy.no_truncation()
    copy.no_padding()
    settings = [
        f"{setting} ({_brief(value)})" for setting, value in (("truncation", truncation), ("padding", padding)) if value is not None
    ]
    _logger.info(
        "tokenizer %s: its %s turned off: stoker tokenizes whole documents, and the packer (or the length buckets) makes the rows",
        name,
        " and ".join(settings) + (" are" if len(settings) > 1 else " is"),
    )
    return copy


def _brief(setting: Any) -> str:
    """A truncation or padding setting in a few words (the package gives them as dicts)."""
    if not isinstance(setting, dict):
        return str(setting)[:80]
    wanted = ("max_length", "stride", "length", "pad_to_multiple_of")
    return ", ".join(f"{key} {setting[key]}" for key in wanted if setting.get(key) is not None) or "on"
