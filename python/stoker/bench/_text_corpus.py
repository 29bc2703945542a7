"""A raw text corpus and a tokenizer made here, for the text benchmark and the tests (nothing can be
downloaded on the machines that run them).

The corpus imitates web text where it matters to a loader: document lengths are log-normal
(median about 300 words, a long tail to tens of thousands, as in FineWeb), words follow Zipf's
law over a vocabulary of pseudo-words (so a BPE tokenizer's caches see what they see on real
text), with sentence punctuation and paragraphs. The tokenizer is a byte-level BPE (GPT-2's
pre-tokenizer) trained on a sample of the corpus with the Hugging Face ``tokenizers`` trainer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

__all__ = ["EOS", "corpus_documents", "train_tokenizer", "write_jsonl"]

EOS = "<|endoftext|>"
_VOCABULARY = 40_000


def _words(generator: np.random.Generator) -> np.ndarray:
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    weights = 1.0 / np.arange(1, len(letters) + 1) ** 0.9
    lengths = np.clip(generator.poisson(4.5, _VOCABULARY) + 1, 1, 14)
    drawn = generator.choice(letters, size=int(lengths.sum()), p=weights / weights.sum())
    edges = np.concatenate([[0], np.cumsum(lengths)])
    return np.array(["".join(drawn[edges[i] : edges[i + 1]]) for i in range(_VOCABULARY)], dtype=object)


def corpus_documents(count: int, *, seed: int = 0, median_words: int = 300) -> Iterator[str]:
    """``count`` documents of web-like text (see the module's docstring), the same for a seed."""
    generator = np.random.default_rng(seed)
    words = _words(generator)
    ranks = np.arange(1, _VOCABULARY + 1)
    cumulative = np.cumsum(1.0 / ranks**1.1)
    cumulative /= cumulative[-1]
    for _ in range(count):
        length = int(min(60_000, max(3, generator.lognormal(np.log(median_words), 1.0))))
        chosen = words[np.minimum(np.searchsorted(cumulative, generator.random(length)), _VOCABULARY - 1)]
        # Sentences of 5-30 words, paragraphs of 3-8 sentences.
        ends = np.cumsum(generator.integers(5, 30, size=length // 5 + 2))
        ends = ends[ends < length]
        chosen[ends - 1] = [word + "." for word in chosen[ends - 1]]
        text = " ".join(chosen.tolist())
        yield text[0].upper() + text[1:] + "."


def write_jsonl(path: str | os.PathLike[str], documents: Iterator[str], *, target_bytes: int | None = None) -> tuple[int, int]:
    """Write ``{"id": n, "text": ...}`` lines; stops at ``target_bytes`` if given. Returns
    (documents, bytes) written."""
    written = 0
    count = 0
    with open(path, "w", encoding="utf-8") as file:
        for text in documents:
            line = json.dumps({"id": count, "text": text}) + "\n"
            file.write(line)
            written += len(line)
            count += 1
            if target_bytes is not None and written >= target_bytes:
                break
    return count, written


def train_tokenizer(path: str | os.PathLike[str], documents: list[str], *, vocabulary: int = 16_384) -> Path:
    """Train a byte-level BPE on ``documents`` and save it as ``tokenizer.json`` at ``path``
    (with ``<|endoftext|>`` as its one special token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocabulary, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(documents, trainer)
    tokenizer.save(str(path))
    return Path(path)
