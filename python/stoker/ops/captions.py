"""Captions tokenized beside their images: image-text pairs (LAION-style shards: an image, its
``txt`` caption and ``json`` metadata per sample) come out of the Loader as an image batch and a
token batch aligned with it, padded, with the attention mask, tokenized in the pipeline's decode
stage (measured there), not on the training loop's thread.

``Loader(..., extra=(Captions(Tokenizer("tokenizer.json")),))``: the caption member is read with
the image; a caption that is missing, not text, or longer than ``max_bytes`` is a bad sample
like an image that does not decode (replaced, zero-filled or raised, as the failure policy says).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ConfigurationError
from .text import Tokenizer

__all__ = ["CaptionBatch", "Captions", "caption_text", "tokenize_captions"]


@dataclass(frozen=True)
class Captions:
    """Which member holds each sample's caption, and how it becomes tokens.

    Args:
        tokenizer: The `Tokenizer` (its ``bos``/``eos`` are put around each caption).
        member: The member holding the caption: ``txt`` (the text), or ``json`` with ``field``.
        field: With a ``json`` member, the key of the caption (dots reach into objects:
            ``"meta.caption"``).
        max_length: Tokens kept per caption (77: CLIP's text context); longer ones are cut and
            flagged in `CaptionBatch.truncated`.
        padding: ``"longest"``: each batch padded to its longest caption (at most
            ``max_length``); ``"max_length"``: always ``max_length`` (one shape for a compiler).
        pad_id: The token id of padding (masked out by the attention mask).
        max_bytes: A caption longer than this is a bad sample, refused before it is tokenized.

    Raises:
        ConfigurationError: A bad size, padding or member.
    """

    tokenizer: Tokenizer
    member: str = "txt"
    field: str | None = None
    max_length: int = 77
    padding: Literal["longest", "max_length"] = "longest"
    pad_id: int = 0
    max_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if not isinstance(self.tokenizer, Tokenizer):
            raise ConfigurationError(f"tokenizer must be a stoker.ops.Tokenizer, got {type(self.tokenizer).__name__}")
        if not 1 <= self.max_length <= 1 << 20 or self.max_bytes < 1:
            raise ConfigurationError(f"max_length must be 1 to 1,048,576 and max_bytes positive, got {self.max_length}, {self.max_bytes}")
        if self.padding not in ("longest", "max_length"):
            raise ConfigurationError(f'padding must be "longest" or "max_length", got {self.padding!r}')
        if not self.member or (self.member.lower() == "json") != (self.field is not None):
            raise ConfigurationError("a json member needs field= (the caption's key); a txt member takes none")


@dataclass
class CaptionBatch:
    """A batch's captions as tokens, row ``i`` the caption of the batch's sample ``i``.

    Attributes:
        input_ids: int32 ``(batch, length)``, padded with ``pad_id``.
        attention_mask: uint8 ``(batch, length)``: 1 on a caption's tokens, 0 on padding.
        lengths: int32 tokens kept per caption (0 where the sample has none: zero-filled).
        truncated: True where a caption was cut to ``max_length``.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    lengths: np.ndarray
    truncated: np.ndarray


def caption_text(members: dict[str, Any], captions: Captions) -> str:
    """A sample's caption from its decoded members.

    Raises:
        ValueError: The member or field is missing, not text, or over ``max_bytes``.
    """
    value: Any = members.get(captions.member)
    if captions.field is not None:
        for part in captions.field.split("."):
            if not isinstance(value, dict) or part not in value:
                raise ValueError(f"its {captions.member} member has no {captions.field!r} caption")
            value = value[part]
    if not isinstance(value, str):
        raise ValueError(f"its caption is {type(value).__name__}, not text")
    if len(value) > captions.max_bytes or len(value.encode("utf-8", "surrogatepass")) > captions.max_bytes:
        raise ValueError(f"its caption is over the max_bytes={captions.max_bytes:,} of Captions")
    return value


def tokenize_captions(texts: list[str | None], captions: Captions) -> CaptionBatch:
    """``texts`` (None: a zero-filled sample, an empty row) tokenized in one call (the
    tokenizer's batch call, without the GIL) into padded rows."""
    present = [slot for slot, text in enumerate(texts) if text is not None]
    tokens, lengths = np.zeros(0, np.uint32), np.zeros(0, np.int64)
    if present:
        tokens, lengths = captions.tokenizer.encode([str(texts[slot]) for slot in present])
    kept = np.minimum(lengths, captions.max_length)
    width = captions.max_length if captions.padding == "max_length" else int(kept.max(initial=0))
    input_ids = np.full((len(texts), width), captions.pad_id, dtype=np.int32)
    attention_mask = np.zeros((len(texts), width), dtype=np.uint8)
    all_lengths = np.zeros(len(texts), dtype=np.int32)
    truncated = np.zeros(len(texts), dtype=bool)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    for row, slot in enumerate(present):
        count = int(kept[row])
        input_ids[slot, :count] = tokens[starts[row] : starts[row] + count]
        attention_mask[slot, :count] = 1
        all_lengths[slot] = count
        truncated[slot] = lengths[row] > count
    return CaptionBatch(input_ids, attention_mask, all_lengths, truncated)
