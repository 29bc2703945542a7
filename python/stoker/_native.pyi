"""Type stubs for the native core, `stoker._native` (Rust, built by maturin).

Every function and method here runs under one panic guard: a Rust panic raises
`stoker.errors.NativePanicError` naming the call, never pyo3's ``PanicException``."""

import os
from collections.abc import Sequence
from typing import Any, TypedDict, final

import numpy as np

__all__ = [
    "__version__",
    "build_info",
    "ImageTransform",
    "decode_image",
    "decode_batch_into",
    "image_sizes",
    "encode_jpeg",
    "read_ranges",
    "crc32",
    "lock_bytes",
    "unlock_bytes",
    "list_tree",
    "key_hashes",
    "CacheEntries",
    "TokenPacker",
    "TextTokenizer",
    "check_tokenizer_json",
    "MAX_TOKEN_ID",
    "AudioTransform",
    "VideoTransform",
]

__version__: str

class _BuildInfo(TypedDict):
    version: str
    optimized: bool
    target_features: list[str]

def build_info() -> _BuildInfo:
    """Describe this build of the native core: version, optimization, CPU features."""

@final
class ImageTransform:
    """What to do to every image. Sizes are (height, width).

    Exactly one of resize_shorter/resize may be given; center_crop, random_resized_crop and
    cover are exclusive, and random_resized_crop and cover take no resize. cover (a bucket's
    shape) resizes the image, keeping its aspect ratio, to just cover (height, width) and crops
    the overhang, centred or (cover_crop="random") at a seeded place. mean/std apply to float dtypes.
    Sizes are (height, width); the crops also take an int for a square, as torchvision does.
    dct_scaling lets a JPEG decode at 1/2, 1/4 or 1/8 size when the output is at least that
    much smaller (libjpeg-turbo's scaled IDCT: within a mean of 0.5 levels of torchvision's
    pixels on photos, about 1.4x faster at 2048x1536); False decodes every pixel.
    An image whose header declares more than max_pixels pixels (default: Pillow's limit,
    89,478,485) is refused before any pixel memory is allocated.
    """

    def __new__(
        cls,
        *,
        resize_shorter: int | None = None,
        resize: tuple[int, int] | None = None,
        center_crop: int | tuple[int, int] | Sequence[int] | None = None,
        random_resized_crop: int | tuple[int, int] | Sequence[int] | None = None,
        cover: int | tuple[int, int] | Sequence[int] | None = None,
        cover_crop: str = "center",
        scale: tuple[float, float] = ...,  # (0.08, 1.0)
        ratio: tuple[float, float] = ...,  # (3/4, 4/3)
        flip_probability: float = 0.0,
        grayscale: bool = False,
        dct_scaling: bool = True,
        layout: str = "HWC",
        dtype: str = "uint8",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        max_pixels: int = ...,  # 89_478_485
    ) -> ImageTransform: ...
    @property
    def max_pixels(self) -> int: ...
    @property
    def output_size(self) -> tuple[int, int] | None: ...
    @property
    def channels(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def layout(self) -> str: ...
    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, Any]]: ...

def decode_image(data: bytes | bytearray, transform: ImageTransform, seed: int = 0) -> np.ndarray:
    """Decode and transform one image into a new array (GIL released). Raises ValueError."""

def decode_batch_into(
    inputs: Sequence[bytes | bytearray],
    transform: ImageTransform,
    out: np.ndarray,
    seeds: Sequence[int],
    compact: bool = False,
    threads: int = 1,
) -> list[str | None]:
    """Decode inputs into out[i] (GIL released); one error message or None per input."""

@final
class AudioTransform:
    """A window of `samples` at `sample_rate` Hz from every audio file (FFmpeg decode in the media part, band-limited
    resampling). channels: mix down (or up) to this many; select_channel: keep that one input
    channel instead. window: "random" (seeded per sample), "center" or "start"; shorter files
    are zero-padded. dtype: "float32" in [-1, 1] or "int16"."""

    def __new__(
        cls,
        *,
        sample_rate: int = 16000,
        samples: int,
        channels: int = 1,
        select_channel: int | None = None,
        window: str = "random",
        dtype: str = "float32",
    ) -> AudioTransform: ...
    @property
    def output_shape(self) -> tuple[int, int]:
        """(channels, samples) of each output."""
    @property
    def sample_rate(self) -> int: ...
    @property
    def dtype(self) -> str:
        """ "float32" or "int16"."""
    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, Any]]: ...

@final
class VideoTransform:
    """A clip of `frames` RGB frames from every video file: every `stride`th frame (or frames at
    `fps`), placed by clip ("random", seeded per sample; "center"; "start"; or "uniform": spread
    evenly over the whole video). Each frame is resized (resize_shorter, or resize=(height,
    width)) then cropped: center_crop=(height, width), or random_crop=(height, width) at a place
    drawn per clip from its seed; or cover=(height, width): resized to just cover it, keeping the
    aspect ratio, the overhang cropped where cover_crop says ("center" or "random", per clip);
    flip_probability mirrors a clip (every frame alike). layout: "TCHW", "THWC" or "CTHW"; uint8."""

    def __new__(
        cls,
        *,
        frames: int,
        stride: int = 1,
        fps: float | None = None,
        clip: str = "random",
        resize_shorter: int | None = None,
        resize: tuple[int, int] | None = None,
        center_crop: tuple[int, int] | None = None,
        random_crop: tuple[int, int] | None = None,
        cover: tuple[int, int] | None = None,
        cover_crop: str = "center",
        flip_probability: float = 0.0,
        layout: str = "TCHW",
    ) -> VideoTransform: ...
    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        """Each clip's shape in the layout's order."""
    @property
    def dtype(self) -> str:
        """Always "uint8"."""
    def __getnewargs_ex__(self) -> tuple[tuple[()], dict[str, Any]]: ...

def image_sizes(inputs: Sequence[bytes | bytearray], max_pixels: int = ...) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """Each image's upright (width, height) from its header alone (GIL released): int64 widths
    and heights, and per input None or why its header could not be read (size 0 x 0 then)."""

def encode_jpeg(pixels: np.ndarray, quality: int = 90) -> bytes:
    """A JPEG of an (height, width, 3) uint8 RGB array (4:2:0, Pillow's defaults; GIL released)."""

def read_ranges(
    path: str | os.PathLike[str], ranges: Sequence[tuple[int, int]], max_gap: int = 65536, max_read: int = 8388608
) -> list[bytes]:
    """Read (offset, length) ranges of a file, coalescing nearby ones (GIL released).

    Raises FileNotFoundError, PermissionError, or OSError naming the file, offset and size."""

def crc32(data: bytes) -> int:
    """zlib's CRC-32 of data (what zlib.crc32 returns), several times faster; GIL released for large buffers."""

def lock_bytes(handles: Sequence[int], offsets: Sequence[int]) -> list[bool]:
    """Exclusive locks on the byte at each offset, in the open file of the same place in handles,
    never waiting (POSIX only): whether each is now this process's. Holds the GIL. Raises
    OSError (none left taken), ValueError where the lengths differ."""

def unlock_bytes(handles: Sequence[int], offsets: Sequence[int]) -> None:
    """Let go of this process's lock on the byte at each offset, in the open file of the same
    place in handles (POSIX only). Raises OSError, ValueError where the lengths differ."""

def list_tree(
    folders: Sequence[str | os.PathLike[str]], base: str | os.PathLike[str], extensions: Sequence[str], threads: int = 8
) -> list[tuple[list[str], list[tuple[str, int]], list[tuple[str, int]]]]:
    """Per folder: (sorted files relative to base with a matching extension, [(folder, mtime_ns)],
    [(path, why)] of the entries skipped: why 0 for a folder already walked (a link cycle),
    else the OS error number (a loop of links, a dangling link, an unreadable sub-folder))."""

def key_hashes(offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each key's 128-bit hash as two uint64 arrays; key i is data[offsets[i]:offsets[i + 1]]
    (an Arrow large string array's buffers). GIL released. Raises ValueError on a bad offset."""

@final
class CacheEntries:
    """The node cache's entries, in files read with bounds-checked I/O (one handle per process and folder)."""

    def __new__(cls, folder_descriptor: int, folder: str, sync: bool, boot: str | None = None) -> CacheEntries: ...
    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """Each key's bytes (None where missing or failing its checks), one read of the state; holds the GIL."""

    def put_many(self, items: Sequence[tuple[bytes, bytes | memoryview]], max_bytes: int, detach: bool = False) -> int:
        """Keep each (key, data) in one store, oldest segments removed to stay within max_bytes;
        how many were kept. detach: let go of the GIL whatever the size (else from 1 MB)."""

    def size(self) -> int:
        """Bytes charged to the entries held now."""

    def __len__(self) -> int: ...
    def notices(self) -> list[tuple[str, str]]:
        """(level, text) pairs to tell the user since the last call: the store emptied and why, damaged entries."""

    def close(self) -> None:
        """Let go of this process's handle; later calls raise OSError."""

MAX_TOKEN_ID: int

def check_tokenizer_json(json: str) -> None:
    """Raise ValueError for a tokenizer.json whose normalizers can grow a text more than 64 times,
    or with a token id past MAX_TOKEN_ID."""

@final
class TextTokenizer:
    """A tokenizer.json loaded in the native core (see stoker.ops.Tokenizer, which uses it); its
    limits checked (normalizer growth, padding, truncation stride: ValueError)."""

    def __new__(cls, json: str, add_special_tokens: bool = False, bos: int | None = None, eos: int | None = None) -> TextTokenizer: ...
    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids back to back (the marks included) and each text's length; GIL released."""
        ...

@final
class TokenPacker:
    """Packs documents into rows (see stoker.ops.packing.SequencePacker)."""

    def __new__(
        cls, context: int, strategy: str = "best_fit", window: int = 1024, long_documents: str = "split", split_across_rows: bool = False
    ) -> TokenPacker: ...
    def push_many(self, tokens: np.ndarray, lengths: np.ndarray, first_document: int) -> None: ...
    def finish(self) -> None: ...
    @property
    def ready_rows(self) -> int: ...
    def take_batch(self, rows: int, pad_id: int) -> dict[str, Any] | None: ...
    def state(self) -> dict[str, object]: ...
    def restore(self, state: dict[str, object], fetch: object) -> None: ...
    @property
    def counters(self) -> dict[str, int]: ...
