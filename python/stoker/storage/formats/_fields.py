"""Which field of a peer's record is the payload and which the label: the user's choice, or
the obvious one, said in words (`FieldChoice.describe`), since a wrong guess would train on the
wrong bytes without a sound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..._bounded import shown_logger
from ...errors import ConfigurationError, StorageError

__all__ = ["FieldChoice", "choose_fields"]

_logger = shown_logger("stoker.storage")

PAYLOAD_NAMES = ("image", "img", "jpg", "jpeg", "png", "webp", "image/encoded", "data", "bytes", "x", "input", "audio", "video")
"""Field names taken as the payload when the user names none, first present wins."""
LABEL_NAMES = ("label", "labels", "class", "cls", "target", "y", "image/class/label", "class_id", "category")
"""Field names taken as the label when the user names none."""


@dataclass(frozen=True)
class FieldChoice:
    """The payload field and the label field (None: no labels) of a dataset, and whether stoker
    picked them."""

    payload: str
    label: str | None
    picked: bool

    def describe(self) -> str:
        how = "picked by stoker (name others with payload= and label=)" if self.picked else "as asked"
        return f"payload {self.payload!r}, label {self.label!r} ({how})"


def choose_fields(
    fields: Sequence[str],
    payload_candidates: Sequence[str],
    label_candidates: Sequence[str],
    payload: str | None,
    label: str | None,
    source: str,
) -> FieldChoice:
    """The fields to read.

    Args:
        fields: Every field the records have.
        payload_candidates: Fields that can be a payload (bytes-like), best first.
        label_candidates: Fields that can be a label (numbers).
        payload: The user's payload field (None: pick one).
        label: The user's label field (None: pick one if an obvious one exists; ``""``: none).
        source: The dataset, for messages.

    Raises:
        ConfigurationError: A named field that is not there or cannot serve; the message lists
            the fields.
        StorageError: No field that can be a payload at all (the data, not the user, is wrong).
    """
    listed = ", ".join(repr(name) for name in fields)
    if payload is not None and payload not in payload_candidates:
        why = "has no such field" if payload not in fields else "cannot use it as the payload (not bytes, text or an array)"
        raise ConfigurationError(f"{source}: payload={payload!r}: the dataset {why}; its fields: {listed}")
    if label and label not in label_candidates:
        why = "has no such field" if label not in fields else "cannot use it as the label (not a number)"
        raise ConfigurationError(f"{source}: label={label!r}: the dataset {why}; its fields: {listed}")
    picked = payload is None or label is None
    if payload is None:
        named = [name for name in PAYLOAD_NAMES if name in payload_candidates]
        if not named and not payload_candidates:
            # The data's doing, not the user's: a storage error, naming the file.
            raise StorageError(f"{source}: no field holds bytes to read as the payload; its fields: {listed or 'none'}")
        payload = named[0] if named else payload_candidates[0]
    if label is None:
        label = next((name for name in LABEL_NAMES if name in label_candidates), None)
    choice = FieldChoice(payload, label or None, picked)
    if picked:
        _logger.info("%s: %s", source, choice.describe())
    return choice
