"""The shared bounded parts: every reader of outside input goes through these, so a new surface
inherits their limits instead of writing its own.

Outside input is anything stoker did not make in this process: files (indexes, states, ledgers,
manifests, tokenizer files, caches in shared folders), server responses, pages, configs. Each part
here bounds one kind of it, and names what it refused:

- files: a path opened only if it is a regular file, never blocking on a FIFO, read up to a limit.
- shown text: text from outside shown to a person (terminal, HTML, logs) with its control
  characters escaped and its length bounded (`shown`, `shown_html`); stoker's loggers show their
  records' arguments so (`shown_logger`, `Lines`).
- tree walks: a user's dataset folder walked with its links followed, each folder once, a link
  cycle or an entry whose kind cannot be read named and skipped, never a loop or a traceback
  (`walk_files`, `matching_files`, `folder_entries`; the native ``list_tree`` keeps the same rules).
- JSON: one reader (`parse_json`, `read_json`) with limits on size, nesting depth and the digits
  of a number, each caller choosing the size for its purpose (``MAX_INDEX_BYTES``...); past
  them, a `stoker.errors.JsonError` naming the source and the bound.
- http: one body policy for every HTTP and object store read (`BODY_LIMITS` per purpose, never
  allocated from a declared length; at most 5 redirects, a loop named at once; every header the
  user supplied dropped on a redirect to another origin; an overall deadline per request), and
  `HttpClient`, the client that applies it to web servers and metrics pages; which failures are
  retried (`classify_http_error`).
- native calls (in Rust, not here): every entry point of both native modules runs under one
  panic guard (src/core/panic_guard.rs: a Rust panic is a `stoker.errors.NativePanicError`
  naming the call), and sizes read from input are checked before the native code allocates
  them; a tokenizer file is checked there before either tokenizer loads it
  (``stoker._native.check_tokenizer_json``).
- keys: a key list (a caller's, a side table's, a file's) read as text keys, a null or a number
  refused by name with its position, an iterable consumed once up to a bound.
- managed folders: a folder stoker keeps files in (the node cache), opened once and checked (a
  link refused, another user's refused, one other users can write replaced by a private one),
  every file in it opened, made and removed through its descriptor, never through a link; only
  names the caller made are removed (`private_folder`, `ManagedFolder`).
- tls: certificates always verified, a private CA trusted by ``ca_bundle=`` (`ca_certificates`,
  `ssl_context`) or a store's SDK setting (`ca_from_environment`), and a certificate, handshake or
  host name that fails named in one line at once (`StorageUnreachableError`).

New code that reads outside input uses these parts (docs/contributing.md, "Reading outside
input"), and lands with a fuzz target in ``tests/faults/``. This package imports nothing of
stoker's but ``errors``: every layer may use it.
"""

from ._files import file_kind, open_regular, read_regular, require_regular
from ._http import (
    BODY_LIMITS,
    MAX_REDIRECTS,
    REDIRECT_STATUSES,
    BoundedBody,
    HttpSettings,
    Purpose,
    RedirectChain,
    origin,
    purpose_words,
    refuse_declared,
    shown_url,
    size_words,
)
from ._http_client import HttpClient, HttpHead, fetch_page
from ._http_status import (
    FailureKind,
    HttpMissingError,
    HttpRefusedError,
    HttpStatusError,
    RangesNotServedError,
    classify_http_error,
    status_error_of,
)
from ._json import (
    MAX_DIGITS,
    MAX_DOCUMENT_BYTES,
    MAX_INDEX_BYTES,
    MAX_JSON_DEPTH,
    MAX_MANIFEST_BYTES,
    MAX_METADATA_BYTES,
    MAX_STATE_BYTES,
    parse_json,
    read_json,
)
from ._keys import key_list, key_text
from ._managed_folder import ManagedFolder, private_folder
from ._shown_log import LOG_LIMIT, Lines, shown_logger
from ._shown_text import SHOWN_LIMIT, shown, shown_html
from ._tls import (
    ca_certificates,
    ca_from_environment,
    handshake_failure,
    name_does_not_resolve,
    name_failure,
    rustls_certificate_failure,
    ssl_context,
)
from ._tree import ALREADY_WALKED, folder_entries, folders_up_from, matching_files, skipped_why, tell_skipped, walk_files

__all__ = [
    "ALREADY_WALKED",
    "BODY_LIMITS",
    "LOG_LIMIT",
    "MAX_DIGITS",
    "MAX_DOCUMENT_BYTES",
    "MAX_INDEX_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MANIFEST_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_REDIRECTS",
    "MAX_STATE_BYTES",
    "REDIRECT_STATUSES",
    "SHOWN_LIMIT",
    "BoundedBody",
    "FailureKind",
    "HttpClient",
    "HttpHead",
    "HttpMissingError",
    "HttpRefusedError",
    "HttpSettings",
    "HttpStatusError",
    "Lines",
    "ManagedFolder",
    "Purpose",
    "RangesNotServedError",
    "RedirectChain",
    "ca_certificates",
    "ca_from_environment",
    "classify_http_error",
    "fetch_page",
    "file_kind",
    "folder_entries",
    "folders_up_from",
    "handshake_failure",
    "key_list",
    "key_text",
    "matching_files",
    "name_does_not_resolve",
    "name_failure",
    "open_regular",
    "origin",
    "parse_json",
    "private_folder",
    "purpose_words",
    "read_json",
    "read_regular",
    "refuse_declared",
    "require_regular",
    "rustls_certificate_failure",
    "shown",
    "shown_html",
    "shown_logger",
    "shown_url",
    "size_words",
    "skipped_why",
    "ssl_context",
    "status_error_of",
    "tell_skipped",
    "walk_files",
]
