"""The native core's copy of a Hugging Face tokenizer, used by `Tokenizer` once it agrees.

The Python ``tokenizers`` package hands back one ``Encoding`` object and one Python list per
document, built while the GIL is held; on web text that is about 8% of the time of its own batch
call, and a loader's pipeline waits on it. The native core links the crate that package binds
and writes every document's ids into one flat array without the GIL.

Two builds of one tokenizer are only worth having if they give the same ids, so the native copy
is trusted step by step: it must load the tokenizer's JSON; it must give the package's ids on
`PROBES` (scripts, digits, whitespace runs, emoji, the tokenizer's own special tokens); and the
first real call is encoded both ways and compared. Any difference, and the package is used from
then on, with the reason logged once (`reason` keeps it).

A fork after the native copy used its thread pool leaves the child a pool without threads (a call
there would never return), so in such a child the package is used (it has its own guard).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._bounded import shown_logger

__all__ = ["NativeTokenizer", "PROBES"]

_logger = shown_logger("stoker.text")

PROBES = [
    "The quick brown fox jumps over the lazy dog. It's 3.14159, isn't it?",
    "  leading and   inner   spaces\tand\ttabs\n\nnew lines\r\n",
    "Ünïcödé àccents, ß, Œuvre, naïve café — “quotes” ‘and’ dashes…",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "Emoji: 👍🏽 👨‍👩‍👧 🇫🇷 and symbols ∑ ∞ ≠ ☃",
    "العربية والעברית, हिन्दी, ไทย",
    "e\u0301 combining, zero\u200bwidth, soft\u00adhyphen",
    "x = [1, 2, 3]; def f(a): return a**2  # code",
    "000123 4567890 1,000,000 0x1F",
    "",
]

# Native copies whose thread pool has run in this process: unusable in a forked child.
_USED = threading.Event()
_FORKED_AFTER_USE = threading.Event()


def _after_fork_in_child() -> None:
    if _USED.is_set():
        _FORKED_AFTER_USE.set()


os.register_at_fork(after_in_child=_after_fork_in_child)


class NativeTokenizer:
    """The native copy of ``backend`` (a ``tokenizers.Tokenizer``), checked against it.

    Args:
        backend: The Python package's tokenizer.
        add_special_tokens: As `Tokenizer`'s.
        bos: As `Tokenizer`'s (an id).
        eos: As `Tokenizer`'s (an id).
        package_encode: The package's path: texts to (ids, lengths), what the copy must match.

    Raises:
        Exception: What ``package_encode`` raises on the probes (the package fails on plain text).
    """

    def __init__(
        self,
        backend: Any,
        add_special_tokens: bool,
        bos: int | None,
        eos: int | None,
        package_encode: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]],
    ) -> None:
        self._package_encode = package_encode
        self._native: Any = None
        self._verified = False
        self.reason = ""
        try:
            from .. import _native

            native = _native.TextTokenizer(backend.to_str(), add_special_tokens, bos, eos)
        except Exception as error:  # an older core, or JSON this crate version cannot read
            self._give_up(f"the native core cannot load it ({error})")
            return
        probes = PROBES + [token for token in _special_tokens(backend)]
        expected = package_encode(probes)  # raises where the package itself fails on them
        try:
            got = native.encode(probes)
        except Exception as error:  # a regex that gives up on a probe in this core's engine
            self._give_up(f"it fails on the probes ({error})")
            return
        difference = _difference(got, expected)
        if difference is not None:
            self._give_up(f"its ids differ from the tokenizers package's on {probes[difference]!r}")
            return
        self._native = native
        self.reason = "the native core's copy, the same ids as the tokenizers package on the probes and the first call"

    @property
    def usable(self) -> bool:
        """Whether calls go to the native copy."""
        return self._native is not None and not _FORKED_AFTER_USE.is_set()

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of ``texts`` back to back and each one's length, from the native copy (or
        the package, where the copy is not usable)."""
        native = self._native
        if native is None or _FORKED_AFTER_USE.is_set():
            return self._package_encode(texts)
        _USED.set()
        result: tuple[np.ndarray, np.ndarray] = native.encode(list(texts))
        if not self._verified:
            expected = self._package_encode(texts)
            difference = _difference(result, expected)
            if difference is not None:
                self._give_up(f"its ids differ from the tokenizers package's on the first call's text {difference}")
                return expected
            self._verified = True
        return result

    def _give_up(self, why: str) -> None:
        self._native = None
        self.reason = f"the tokenizers package: {why}"
        _logger.warning("tokenizer: using the tokenizers package, not the native core's copy: %s", why)


def _special_tokens(backend: Any) -> list[str]:
    """The tokenizer's added tokens, each on its own and inside text."""
    try:
        added = list(backend.get_added_tokens_decoder().values())
    except Exception:
        return []
    return [f"{token.content} between {token.content}words" for token in added[:20]]


def _difference(got: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> int | None:
    """The first text whose ids differ, or None."""
    got_ids, got_lengths = got
    ids, lengths = expected
    if np.array_equal(got_lengths, lengths) and np.array_equal(got_ids, ids):
        return None
    ends, expected_ends = np.cumsum(got_lengths), np.cumsum(lengths)
    for text in range(min(len(lengths), len(got_lengths))):
        start, expected_start = (ends[text - 1] if text else 0), (expected_ends[text - 1] if text else 0)
        if not np.array_equal(got_ids[start : ends[text]], ids[expected_start : expected_ends[text]]):
            return text
    return min(len(lengths), len(got_lengths))
