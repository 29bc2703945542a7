"""`LanceStorage`: a Lance dataset (the columnar format multimodal teams are moving to) read in
place through Lance's own reader (``pip install pylance``), by row: a batch's rows are one
``take`` of the payload column, which Lance plans as few reads as the layout allows; a blob
column (``lance-encoding:blob``) is read through ``take_blobs``, each blob a range of its file.

Lance's reader trusts the sizes in its files (a damaged one can make it abort the process), so
a dataset's first open reads it through once in a child process (`checked_version`); only a
version that reads cleanly there is opened here, and a marker in stoker's cache folder spares
later opens the pass.

Labels are one column: read once when the dataset opens (a ``take`` of that column alone, a
columnar read of a few bytes per row), so no pass over the payloads is ever needed. Lance reads
local paths and object stores itself (``s3://``, ``gs://``, ``az://``, with ``storage_options``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import StorageError
from .._cache import cache_dir
from .._protocol import Storage
from ._fields import FieldChoice, choose_fields
from ._records import table_key

__all__ = ["LanceStorage", "is_lance_path"]


def is_lance_path(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a Lance dataset: a name ending ``.lance``, or a folder holding Lance's
    ``_versions`` folder."""
    text = str(path).rstrip("/")
    if text.lower().endswith(".lance"):
        return True
    return "://" not in text and os.path.isdir(os.path.join(text, "_versions"))


class _LanceFailure:
    """Lance's errors, and a Rust panic inside it: pyo3 raises a panic as ``PanicException``, a
    ``BaseException`` that cannot be imported by name, so it is recognised by its name here and
    everything else that is not an ``Exception`` (Ctrl-C, exit) passes on untouched."""

    @staticmethod
    def caught(error: BaseException) -> bool:
        return isinstance(error, Exception) or type(error).__name__ == "PanicException"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _lance() -> Any:
    try:
        import lance
    except ImportError as error:
        raise StorageError("reading Lance datasets needs Lance's reader: pip install pylance") from error
    return lance


# Run in a child process: open the dataset, and on its first open read every page of every
# column once; a file that makes Lance's reader abort (it trusts the sizes in its files) takes
# down the child, not the caller. Arguments (credentials among them) come on stdin, never argv.
_CHECK = """
import json, os, sys
arguments = json.load(sys.stdin)
import lance
dataset = lance.dataset(arguments["uri"], version=arguments["version"], storage_options=arguments["options"])
marker = os.path.join(arguments["cache"], arguments["key"] + "-" + str(dataset.version) + ".checked")
if not os.path.exists(marker):
    count = dataset.count_rows()
    blobs = [field.name for field in dataset.schema if "blob" in str(field.type) or (field.metadata or {}).get(b"lance-encoding:blob")]
    for start in range(0, count, 4096):  # by `take` and `take_blobs`, the paths the reads take
        rows = list(range(start, min(count, start + 4096)))
        dataset.take(rows)
        for name in blobs:
            for blob in dataset.take_blobs(name, indices=rows):
                blob.read()
    for _ in dataset.to_batches(batch_size=4096):
        pass
    open(marker, "w").close()
print(json.dumps({"version": dataset.version}))
"""
_CHECK_SECONDS = 3600


def checked_version(uri: str, version: int | None, storage_options: dict[str, str] | None) -> int:
    """The version of the dataset at ``uri`` to read (``version``, or the latest), once a child
    process has opened it and, the first time this version is opened, read every page of it.

    Raises:
        StorageError: The child failed or was killed (a damaged dataset, or not one); names
            ``uri`` and says what Lance said.
    """
    arguments = {
        "uri": uri,
        "version": version,
        "options": storage_options,
        "cache": str(cache_dir("formats")),
        "key": table_key("lance", uri),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHECK], input=json.dumps(arguments), capture_output=True, text=True, timeout=_CHECK_SECONDS
        )
    except subprocess.TimeoutExpired as error:
        raise StorageError(f"{uri}: Lance's reader took more than {_CHECK_SECONDS} s to read it through once") from error
    if done.returncode != 0:
        lines = [
            line for line in done.stderr.strip().splitlines() if line.strip() and not line.startswith(("  ", "note:", "stack backtrace"))
        ]
        said = lines[-1][:500] if lines else f"exit status {done.returncode}"
        raise StorageError(f"{uri}: not a Lance dataset, or a damaged one: its reader failed reading it ({said})")
    try:
        return int(json.loads(done.stdout.strip().splitlines()[-1])["version"])
    except (ValueError, KeyError, IndexError) as error:
        raise StorageError(f"{uri}: Lance's reader gave no version ({done.stdout[-200:]!r})") from error


class _Rows(Sequence[str]):
    """``row N`` keys, made when asked for."""

    def __init__(self, count: int) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [f"row{position}" for position in range(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return f"row{index % self._count}"


class LanceStorage(Storage):
    """Rows of a Lance dataset.

    Args:
        uri: The dataset (a local folder, or ``s3://``, ``gs://``, ``az://``).
        payload: The column each read returns (default: the obvious binary one; `fields` says).
        label: The column of the labels (default: one named like a label; ``""``: none).
        storage_options: Lance's options for an object store (endpoint, credentials), passed
            through; never logged.
        endpoint, region, access_key_id, secret_access_key: An S3-compatible store's settings,
            as `S3Storage` takes them (added to ``storage_options``). ``endpoint`` is also
            Google Cloud Storage's or Azure's (an emulator, a private endpoint) for ``gs://`` and
            ``az://`` URIs.
        service_account, anonymous: Google Cloud Storage's, as `GCSStorage` takes them
            (``anonymous`` reads a public bucket or container unsigned, on Azure too).
        account, account_key, sas_token: Azure's, as `AzureStorage` takes them.
        version: A version of the dataset to read (default: the latest).
        max_concurrent_reads: See `Storage`.

    Raises:
        StorageError: Not a Lance dataset, or Lance's reader missing; names ``uri``.
        ConfigurationError: A named column that is not there or cannot serve.
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        *,
        payload: str | None = None,
        label: str | None = None,
        storage_options: dict[str, str] | None = None,
        version: int | None = None,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        service_account: str | os.PathLike[str] | None = None,
        anonymous: bool = False,
        account: str | None = None,
        account_key: str | None = None,
        sas_token: str | None = None,
        max_concurrent_reads: int = 16,
    ) -> None:
        super().__init__(max_concurrent_reads)
        import pyarrow as pa

        lance = _lance()
        self.uri = str(uri)
        # Each store's own settings, as its Storage takes them, in Lance's object store options
        # (the environment's AWS_*, GOOGLE_* and AZURE_* variables, which Lance reads itself,
        # work as well).
        scheme = self.uri.split("://", 1)[0].lower() if "://" in self.uri else ""
        options = dict(storage_options or {})
        settings = {
            "gs": (
                ("google_base_url", endpoint),
                ("google_service_account", service_account),
                ("google_skip_signature", anonymous or None),
            ),
            "az": (
                ("azure_storage_endpoint", endpoint),
                ("azure_storage_account_name", account),
                ("azure_storage_account_key", account_key),
                ("azure_storage_sas_token", sas_token.lstrip("?") if sas_token else None),
                ("azure_skip_signature", anonymous or None),
            ),
        }.get(
            {"gcs": "gs", "azure": "az", "abfs": "az", "abfss": "az"}.get(scheme, scheme),
            (
                ("aws_endpoint", endpoint),
                ("aws_region", region),
                ("aws_access_key_id", access_key_id),
                ("aws_secret_access_key", secret_access_key),
            ),
        )
        for key, value in settings:
            if value is not None:
                options.setdefault(key, str(value).lower() if isinstance(value, bool) else os.fspath(value))
        if endpoint is not None and endpoint.startswith("http://"):
            options.setdefault("allow_http", "true")
        storage_options = options or None
        version = checked_version(self.uri, version, storage_options)
        try:
            self.dataset = lance.dataset(self.uri, version=version, storage_options=storage_options)
            schema = self.dataset.schema
            count = self.dataset.count_rows()
        except BaseException as error:  # Lance's errors for a path that is not a dataset, or a damaged one
            if not _LanceFailure.caught(error):
                raise
            raise StorageError(f"{self.uri}: not a Lance dataset ({_first_line(error)})") from error
        payloads, labels, self._blobs = [], [], set()
        for field in schema:
            kind = field.type
            blob = (field.metadata or {}).get(b"lance-encoding:blob") in (b"true", b"True") or (
                isinstance(kind, pa.ExtensionType) and "blob" in kind.extension_name
            )  # the older marking, and Lance's blob type since its v2 files
            if (
                blob
                or pa.types.is_binary(kind)
                or pa.types.is_large_binary(kind)
                or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)
            ):
                payloads.append(field.name)
                if blob:
                    self._blobs.add(field.name)
            elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
                labels.append(field.name)
        self.fields: FieldChoice = choose_fields(schema.names, payloads, labels, payload, label, self.uri)
        self.format = "lance"
        self._keys = _Rows(count)
        if self.fields.label is None:
            self._labels = np.full(count, -1, np.int64)  # type: ignore[assignment]
        else:
            column = self._whole_column(self.fields.label)
            floats = pa.types.is_floating(column.type)
            filled = column.fill_null(float("nan") if floats else -1)
            self._labels = np.asarray(filled.to_numpy(), dtype=np.float64 if floats else np.int64)  # type: ignore[assignment]
        self._take_lock = threading.Lock()

    def _whole_column(self, name: str) -> Any:
        """Column ``name`` of every row, as one Arrow array, a million rows per request."""
        import pyarrow as pa

        count = len(self._keys)
        try:
            # `take`, not `to_table`: the scanner hands its batches over an Arrow C stream,
            # whose error path aborts the process on an error message with a NUL byte in it
            # (arrow-rs's ffi_stream; a damaged file's bytes end up in the message).
            return pa.concat_arrays(
                [
                    self.dataset.take(list(range(start, min(count, start + (1 << 20)))), columns=[name]).column(0).combine_chunks()
                    for start in range(0, count, 1 << 20)
                ]
                or [pa.array([], pa.int64())]
            )
        except BaseException as error:
            if not _LanceFailure.caught(error):
                raise
            raise StorageError(f"{self.uri}: its {name!r} column does not read ({_first_line(error)})") from error

    def read_column(self, name: str) -> np.ndarray:
        """Every row's value in the numeric column ``name`` (float64, NaN where null), without
        the payloads (`ColumnStorage`): sizes or durations for buckets.

        Raises:
            StorageError: No such column, or one that is not numeric.
        """
        import pyarrow as pa

        schema = self.dataset.schema
        if name not in schema.names:
            raise StorageError(f"{self.uri}: no column {name!r} (columns: {', '.join(schema.names)})")
        kind = schema.field(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            raise StorageError(f"{self.uri}: column {name!r} holds {kind}, not numbers")
        column = self._whole_column(name).cast(pa.float64()).fill_null(float("nan"))
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)

    def read_values(self, name: str) -> np.ndarray:
        """Every row's value in the column ``name``, for a filter (`Sampling(where=...)`): numbers
        as float64 (NaN where null), anything else as an object array (None where null).

        Raises:
            StorageError: No such column.
        """
        import pyarrow as pa

        schema = self.dataset.schema
        if name not in schema.names:
            raise StorageError(f"{self.uri}: no column {name!r} (columns: {', '.join(schema.names)})")
        kind = schema.field(name).type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            return self.read_column(name)
        return np.asarray(self._whole_column(name).to_numpy(zero_copy_only=False), dtype=object)

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        if not len(indices):
            return []
        order = np.argsort(np.asarray(indices, dtype=np.int64), kind="stable")
        wanted = [int(indices[slot]) for slot in order]
        try:
            if self.fields.payload in self._blobs:
                blobs = self.dataset.take_blobs(self.fields.payload, indices=wanted)
                values = [blob.read() for blob in blobs]
            else:
                column = self.dataset.take(wanted, columns=[self.fields.payload]).column(0)
                values = column.to_pylist()
        except BaseException as error:  # Lance's own types; the whole take failed: each row says so
            if not _LanceFailure.caught(error):
                raise
            return [StorageError(f"{self.sample_name(index)}: {type(error).__name__}: {_first_line(error)}") for index in indices]
        results: list[bytes | Exception] = [b""] * len(indices)
        for slot, value in zip(order, values):
            if value is None:
                results[slot] = StorageError(f"{self.sample_name(int(indices[slot]))}: no {self.fields.payload!r} (null)")
            else:
                results[slot] = value.encode() if isinstance(value, str) else bytes(value)
        return results

    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        """Other columns of each row at ``indices`` (`MemberStorage`: a column is a row's member):
        ``{column: value}`` in one take; an exception in place of a row whose column is null, or
        for every row where a column does not exist."""
        names = self.dataset.schema.names
        missing = [column for column in extensions if column not in names]
        if missing:
            return [StorageError(f"{self.uri}: no column {missing[0]!r} (columns: {', '.join(names)})") for _ in indices]
        if not len(indices):
            return []
        try:
            table = self.dataset.take([int(index) for index in indices], columns=list(extensions))
            columns = {column: table.column(column).to_pylist() for column in extensions}
        except BaseException as error:
            if not _LanceFailure.caught(error):
                raise
            return [StorageError(f"{self.sample_name(int(index))}: {type(error).__name__}: {_first_line(error)}") for index in indices]
        results: list[dict[str, Any] | Exception] = []
        for slot, index in enumerate(indices):
            values = {column: columns[column][slot] for column in extensions}
            empty = [column for column, value in values.items() if value is None]
            results.append(StorageError(f"{self.sample_name(int(index))}: column {empty[0]!r} is empty (null)") if empty else values)
        return results

    def sample_name(self, index: int) -> str:
        return f"{self.uri}#row{index}"

    def index_of(self, key: str) -> int:
        """Position of ``key`` (``rowN``), without a table of every key.

        Raises:
            KeyError: No such row.
        """
        if key.startswith("row") and key[3:].isdigit() and int(key[3:]) < len(self._keys):
            return int(key[3:])
        raise KeyError(f"{self.describe()}: no sample with key {key!r}")

    def content_digest(self) -> str:
        """The dataset and its version: Lance's versions are immutable, so this names the data."""
        return f"lance:{self.uri}@{self.dataset.version}:{self.fields.payload}:{self.fields.label}"

    def describe(self) -> str:
        return self.uri
