"""Which Parquet columns hold a dataset's payload, label and key, and what its labels are.

Hugging Face writes its features into the schema metadata (``huggingface`` -> ``info`` ->
``features``): an ``Image`` or ``Audio`` feature is a struct of ``bytes`` and ``path``, a
``ClassLabel`` an integer with its class names. Where that is present it decides; otherwise the
columns are found by type and name, and an ambiguous choice is refused with the candidates named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._bounded import MAX_METADATA_BYTES, parse_json
from ...errors import StorageError
from .._arrow_columns import class_label_names

__all__ = ["ParquetLayout", "class_columns", "find_layout", "payload_values"]

_PAYLOAD_NAMES = ("image", "img", "jpg", "jpeg", "png", "webp", "bytes", "audio", "data", "payload")
_LABEL_NAMES = ("label", "labels", "cls", "class", "target")


@dataclass(frozen=True)
class ParquetLayout:
    """The columns a `ParquetStorage` reads.

    Attributes:
        payload: The column of each sample's bytes (binary, or a struct with a ``bytes`` field).
        label: The label column, or None.
        key: A column of sample keys (given, or a string column ``key`` or ``__key__``), or
            None (keys are then ``file#row``).
        classes: Class names of an integer label column (Hugging Face ``ClassLabel``), or None.
    """

    payload: str
    label: str | None
    key: str | None
    classes: list[str] | None


def _huggingface_features(schema: Any) -> dict[str, Any]:
    metadata = schema.metadata or {}
    raw = metadata.get(b"huggingface")
    if not raw:
        return {}
    try:
        features = (
            parse_json(raw, "a Parquet file's huggingface metadata", max_bytes=MAX_METADATA_BYTES).get("info", {}).get("features", {})
        )
    except (ValueError, AttributeError):
        return {}
    return features if isinstance(features, dict) else {}


def class_columns(schema: Any) -> dict[str, list[str]]:
    """Each ``ClassLabel`` column's class names, from the Hugging Face features in ``schema``'s
    metadata (none where it has none)."""
    return class_label_names(_huggingface_features(schema))


def _is_bytes(field_type: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_binary(field_type) or pa.types.is_large_binary(field_type):
        return True
    return pa.types.is_struct(field_type) and any(
        field_type.field(i).name == "bytes" and _is_bytes(field_type.field(i).type) for i in range(field_type.num_fields)
    )


def _is_text(field_type: Any) -> bool:
    """A string column: a text corpus's documents (FineWeb's ``text``), read as UTF-8 bytes.
    Only a column named by the user: a text column is never guessed to be the payload."""
    import pyarrow as pa

    return bool(pa.types.is_string(field_type) or pa.types.is_large_string(field_type))


def _check_label_type(name: str, field_type: Any, where: str) -> None:
    import pyarrow as pa

    if not (pa.types.is_integer(field_type) or pa.types.is_floating(field_type) or pa.types.is_string(field_type)):
        raise StorageError(f"{where}: label column {name!r} is {field_type}; a label is an integer, a float or a class name (string)")


def find_layout(schema: Any, where: str, *, payload: str | None, label: str | None, key: str | None) -> ParquetLayout:
    """The layout of a file with ``schema``: the columns asked for, checked, or found.

    Args:
        schema: The file's Arrow schema.
        where: The file, for messages.
        payload, label, key: Column names the user gave (None: find them; ``label=""``: no label).

    Raises:
        StorageError: A named column that is missing or of the wrong type (the message lists the
            file's columns), or no or several candidate payload columns.
    """
    names = list(schema.names)
    features = _huggingface_features(schema)

    def field(name: str, role: str) -> Any:
        if name not in names:
            raise StorageError(f"{where}: no {role} column {name!r} (its columns: {', '.join(names)})")
        return schema.field(name).type

    if payload is None:
        from_features = [
            name for name, feature in features.items() if isinstance(feature, dict) and feature.get("_type") in ("Image", "Audio")
        ]
        candidates = from_features or [name for name in names if _is_bytes(schema.field(name).type)]
        preferred = [name for name in candidates if name.lower() in _PAYLOAD_NAMES]
        if len(candidates) == 1 or len(preferred) == 1:
            payload = candidates[0] if len(candidates) == 1 else preferred[0]
        elif not candidates:
            raise StorageError(
                f"{where}: no column of bytes to read samples from (its columns: {', '.join(names)}); name one with image_column="
            )
        else:
            raise StorageError(f"{where}: several columns of bytes ({', '.join(candidates)}); choose one with image_column=")
    payload_type = field(payload, "image")
    if not (_is_bytes(payload_type) or _is_text(payload_type)):
        raise StorageError(
            f"{where}: column {payload!r} is {payload_type}, not bytes (binary, or a struct with a 'bytes' field) nor text (string)"
        )
    classes: list[str] | None = None
    if label is None:
        from_features = [name for name, feature in features.items() if isinstance(feature, dict) and feature.get("_type") == "ClassLabel"]
        by_name = [name for name in names if name.lower() in _LABEL_NAMES]
        label = (from_features or by_name or [None])[0]
    elif label == "":
        label = None
    if label is not None:
        _check_label_type(label, field(label, "label"), where)
        classes = class_label_names(features).get(label)
    import pyarrow as pa

    if key is None:
        # stoker's own conversions write a "key" column; WebDataset-derived data "__key__".
        key = next((name for name in ("key", "__key__") if name in names and pa.types.is_string(schema.field(name).type)), None)
    if key is not None:
        key_type = field(key, "key")
        if not (pa.types.is_string(key_type) or pa.types.is_large_string(key_type) or pa.types.is_integer(key_type)):
            raise StorageError(f"{where}: key column {key!r} is {key_type}; keys are strings or integers")
    return ParquetLayout(payload=payload, label=label, key=key, classes=classes)


def payload_values(column: Any) -> Any:
    """The bytes array of a payload column read from one row group (the ``bytes`` field of a
    struct column, such as Hugging Face's ``Image``; a string column's UTF-8 bytes)."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if _is_text(array.type):  # text as its UTF-8 bytes: the same buffers, no copy
        return array.view(pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary())
    if pa.types.is_struct(array.type):
        bytes_field = array.field("bytes")
        # A null struct is a missing sample, whatever its child holds.
        return pa.compute.if_else(array.is_null(), pa.scalar(None, bytes_field.type), bytes_field) if array.null_count else bytes_field
    return array
