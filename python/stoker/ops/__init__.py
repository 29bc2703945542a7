"""What happens to bytes: image, audio and video decode and transform into batch memory, token
sequence packing (native, GIL-free). Images and packing are the core's; audio and video are the
media part's, which uses the user's FFmpeg and is loaded on first use (`MediaUnavailableError`
when there is none).

- `batch`: any transform's samples into one batch buffer (`decode_batch`, `allocate_batch`).
- `image`: one image (`decode_image`, `ImageTransform`), and images' sizes from their headers (`image_sizes`).
- `media`: one audio window or video clip (`decode_audio`, `decode_video`), and files' lengths
  from their headers (`media_lengths`).
- `packing`: token sequences packed into fixed-length rows (`SequencePacker`).
- `text`: raw text to token ids (`Tokenizer`: Hugging Face ``tokenizers`` or ``tiktoken``; `document_text`).
- `captions`: image-text pairs' captions tokenized into padded rows beside the images (`Captions`).
"""

from .._deprecation import moved_names
from ..errors import BatchDecodeError, ImageDecodeError, MediaDecodeError, MediaUnavailableError
from ._media_backend import media_backend
from .batch import DecodedBatch, allocate_batch, decode_batch, sample_seeds
from .captions import CaptionBatch, Captions, caption_text, tokenize_captions
from .image import ImageSizes, ImageTransform, decode_image, image_sizes
from .media import AudioTransform, MediaLengths, VideoTransform, decode_audio, decode_video, media_lengths, seconds_to_samples
from .packing import EfficiencyReport, PackedBatch, SequencePacker, as_token_array
from .text import Tokenizer, document_text

__all__ = [
    "AudioTransform",
    "BatchDecodeError",
    "CaptionBatch",
    "Captions",
    "DecodedBatch",
    "EfficiencyReport",
    "ImageDecodeError",
    "ImageSizes",
    "ImageTransform",
    "MediaDecodeError",
    "MediaLengths",
    "MediaUnavailableError",
    "PackedBatch",
    "SequencePacker",
    "Tokenizer",
    "VideoTransform",
    "allocate_batch",
    "as_token_array",
    "caption_text",
    "decode_audio",
    "decode_batch",
    "decode_image",
    "decode_video",
    "image_sizes",
    "document_text",
    "media_backend",
    "media_lengths",
    "sample_seeds",
    "seconds_to_samples",
    "tokenize_captions",
]

__getattr__ = moved_names(__name__, {"SampleFailure": "stoker.failures:Failure"})
