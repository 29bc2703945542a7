"""The shared bounded parts: every reader of outside input goes through these, so a new surface
inherits their limits instead of writing its own.

Outside input is anything stoker did not make in this process: files (indexes, states, ledgers,
manifests, tokenizer files, caches in shared folders), server responses, pages, configs. Each part
here bounds one kind of it, and names what it refused:

- files: a path opened only if it is a regular file, never blocking on a FIFO, read up to a limit.

New code that reads outside input uses these parts (docs/contributing.md, "Reading outside
input"), and lands with a fuzz target in ``tests/faults/``. This package imports nothing of
stoker's but ``errors``: every layer may use it.
"""

from ._files import file_kind, open_regular, read_regular, require_regular

__all__ = ["file_kind", "open_regular", "read_regular", "require_regular"]
