"""Decompressing a whole file within a bound: a compressed shard is read whole, and what it
inflates to is checked against what its index declares (or a limit) as it inflates, so a
hostile file never makes stoker allocate more than that."""

from __future__ import annotations

import zlib

from ...errors import ShardError, StorageError

__all__ = ["COMPRESSIONS", "inflate"]

COMPRESSIONS = ("zstd", "gzip")


def inflate(data: bytes | memoryview, compression: str, limit: int, name: str) -> bytes:
    """``data`` decompressed, at most ``limit`` bytes.

    Args:
        data: The compressed file.
        compression: ``"zstd"`` or ``"gzip"``.
        limit: The most bytes it may inflate to.
        name: The file, for messages.

    Raises:
        ShardError: It does not decompress, or inflates past ``limit``.
        StorageError: zstd without the zstandard package (the message says how to install it).
    """
    try:
        if compression == "gzip":
            stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = stream.decompress(data, limit + 1)
            if len(out) > limit or stream.unconsumed_tail:
                raise ShardError(f"{name}: inflates past {limit} bytes, more than its index declares or the limit allows")
            return out
        if compression == "zstd":
            try:
                import zstandard
            except ImportError as error:
                raise StorageError(f"{name}: reading zstd-compressed shards needs zstandard: pip install 'stoker[formats]'") from error
            reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
            parts, total = [], 0
            while total <= limit:
                part = reader.read(min(limit + 1 - total, 16 << 20))
                if not part:
                    break
                parts.append(part)
                total += len(part)
            out = b"".join(parts)
            if total > limit:
                raise ShardError(f"{name}: inflates past {limit} bytes, more than its index declares or the limit allows")
            return out
    except (zlib.error, ValueError, OSError) as error:
        if isinstance(error, StorageError):
            raise
        raise ShardError(f"{name}: does not decompress as {compression} ({error})") from error
    except Exception as error:  # zstandard.ZstdError is none of the above
        if type(error).__name__ == "ZstdError":
            raise ShardError(f"{name}: does not decompress as {compression} ({error})") from error
        raise
    raise StorageError(f"{name}: compression {compression!r} is not one stoker reads (it reads {', '.join(COMPRESSIONS)})")
