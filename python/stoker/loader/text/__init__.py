"""The text path: `TokenLoader`, documents (tokenized, or raw text tokenized on the fly) packed
into fixed-length rows, resumable exactly. Token files and shards are written by
`stoker.ingest.write_token_file` and `stoker.ingest.write_token_shards`; the tokenizer and the
packer are `stoker.ops`'."""

from ._documents import TextChunk, TextDocuments, open_text
from ._stats import TextStats
from ._token_loader import TokenLoader

__all__ = ["TextChunk", "TextDocuments", "TextStats", "TokenLoader", "open_text"]
