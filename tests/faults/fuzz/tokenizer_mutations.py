"""The tokenizer target's seed and its structure-aware mutations.

The seed is a small byte-level BPE in the shape published tokenizers have: a normalizer chain,
a regex split then the byte-level pre-tokenizer, a post-processor adding a mark, truncation and
padding on, added tokens. A byte flip of its JSON mostly makes text the loader refuses at once,
so the mutations here work on its structure: the sizes it asks for (padding, truncation, ids) set
to extremes, hostile regexes (backtracking, empty matches, huge repeats, broken syntax), chains of
normalizers that grow the text, models and post-processors that name ids out of range, keys
dropped or given the wrong type. Hypothesis draws one to four of them a case.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from .mutations import Mutant

# Texts every case encodes, and the corpus its TokenLoader reads: plain words, the run of a's that
# makes backtracking regexes give up, whitespace, scripts, the marks themselves.
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "a" * 41,
    "   \t\n  spaces   ",
    "日本語 العربية 👍🏽 e\u0301",
    "<bos> inside <pad> text",
    "",
]

SIZES = [0, 1, 2, 7, 64, 2**16, 2**20, 2**20 + 1, 10**9, 2**31 - 1, 2**32, 2**63 - 1]
REGEXES = [
    "(a|aa)+(?=b)",
    "(a|aa)+(?=b)|x",
    "((?=a)a|aa)+b",
    "(x+x+)+y",
    "(a*)*b",
    "a{100000}",
    "(",
    "\\",
    "",
    "a*",
    "(?=a)",
    "\\b",
    "\\s+(?!\\S)|\\s+",
    "[^\\s\\p{L}\\p{N}]+",
    "(?<=a)b",
    "\\1",
]
CONTENTS = ["", "x", "ab", "▁", "0123456789" * 10, "\u0000", "\ud7ff" * 3]


def make_seed(folder: Path) -> Path:
    """The seed folder: ``tokenizer.json`` and ``corpus.jsonl`` (the `TEXTS`, a line each)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex("\\s+(?!\\S)|\\s+|\\p{L}+|\\p{N}+"), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<bos>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TEXTS * 3 + ["words of a small corpus, to learn a few merges from"] * 5, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    tokenizer.enable_truncation(64)
    tokenizer.enable_padding(pad_id=2, pad_token="<pad>")
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in TEXTS * 2))
    return folder / "tokenizer.json"


Draw = Callable[[st.SearchStrategy[Any]], Any]


def _normalizer(draw: Draw, depth: int = 0) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(["Replace", "Replace", "Prepend", "NFKC", "NFC", "Lowercase", "Precompiled", "Strip", "Sequence", "Unheard"])
    )
    if kind == "Replace":
        pattern = draw(
            st.sampled_from([{"String": draw(st.sampled_from(["", "a", " ", "ab"]))}, {"Regex": draw(st.sampled_from(REGEXES))}])
        )
        return {"type": "Replace", "pattern": pattern, "content": draw(st.sampled_from(CONTENTS))}
    if kind == "Prepend":
        return {"type": "Prepend", "prepend": draw(st.sampled_from(CONTENTS))}
    if kind == "Precompiled":
        trie = draw(st.sampled_from([0, 4, 2**31, 2**32 - 4]))
        blob = trie.to_bytes(4, "little") + b"\x00" * min(trie, 8) + draw(st.sampled_from([b"ab\x00", b"x" * 200 + b"\x00", b"\xff\x00"]))
        return {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode()}
    if kind == "Strip":
        return {"type": "Strip", "strip_left": True, "strip_right": draw(st.booleans())}
    if kind == "Sequence" and depth < 40:
        return {"type": "Sequence", "normalizers": [_normalizer(draw, depth + 1) for _ in range(draw(st.integers(0, 10)))]}
    return {"type": kind}


def _pre_tokenizer(draw: Draw, depth: int = 0) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Split", "Split", "Metaspace", "Digits", "ByteLevel", "Whitespace", "Sequence", "Punctuation"]))
    if kind == "Split":
        pattern = draw(st.sampled_from([{"Regex": draw(st.sampled_from(REGEXES))}, {"String": draw(st.sampled_from(["", " ", "a"]))}]))
        behavior = draw(st.sampled_from(["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]))
        return {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": draw(st.booleans())}
    if kind == "Metaspace":
        return {
            "type": "Metaspace",
            "replacement": draw(st.sampled_from(["▁", "a"])),
            "prepend_scheme": "always",
            "split": draw(st.booleans()),
        }
    if kind == "Digits":
        return {"type": "Digits", "individual_digits": draw(st.booleans())}
    if kind == "ByteLevel":
        return {"type": "ByteLevel", "add_prefix_space": draw(st.booleans()), "trim_offsets": True, "use_regex": draw(st.booleans())}
    if kind == "Sequence" and depth < 40:
        return {"type": "Sequence", "pretokenizers": [_pre_tokenizer(draw, depth + 1) for _ in range(draw(st.integers(0, 6)))]}
    return {"type": kind}


def _numbers(value: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every number inside ``value``."""
    found: list[tuple[Any, Any]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, inner in items:
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            found.append((value, key))
        elif isinstance(inner, (dict, list)):
            found.extend(_numbers(inner))
    return found


def _mutate(draw: Draw, document: dict[str, Any]) -> None:
    """One structural mutation of ``document``, in place."""
    kind = draw(st.sampled_from(["padding", "truncation", "normalizer", "pre_tokenizer", "model", "added", "processor", "key", "number"]))
    size = st.sampled_from(SIZES)
    if kind == "padding":
        strategy = draw(st.sampled_from(["BatchLongest", {"Fixed": draw(size)}]))
        multiple = draw(st.sampled_from([None, draw(size)]))
        document["padding"] = {
            "strategy": strategy,
            "direction": "Right",
            "pad_to_multiple_of": multiple,
            "pad_id": draw(size) % 2**32,
            "pad_type_id": 0,
            "pad_token": "<pad>",
        }
    elif kind == "truncation":
        document["truncation"] = {
            "direction": draw(st.sampled_from(["Right", "Left"])),
            "max_length": draw(size),
            "stride": draw(size),
            "strategy": draw(st.sampled_from(["LongestFirst", "OnlyFirst", "OnlySecond"])),
        }
    elif kind == "normalizer":
        document["normalizer"] = _normalizer(draw)
    elif kind == "pre_tokenizer":
        document["pre_tokenizer"] = _pre_tokenizer(draw)
    elif kind == "model":
        model = document["model"]
        change = draw(st.sampled_from(["type", "dropout", "vocab", "merges", "unk"]))
        if change == "type":
            model["type"] = draw(st.sampled_from(["WordPiece", "WordLevel", "Unigram", "BPE", "Unheard"]))
        elif change == "dropout":
            model["dropout"] = draw(st.sampled_from([0.5, 1.0, -1.0, 1e300, None]))
        elif change == "vocab" and isinstance(model.get("vocab"), dict) and model["vocab"]:
            token = draw(st.sampled_from(sorted(model["vocab"])))
            model["vocab"][token] = draw(size)
        elif change == "merges" and isinstance(model.get("merges"), list):
            model["merges"] = model["merges"][: draw(st.integers(0, 5))] + [["<unk>", "zz"], ["", ""]]
        else:
            model["unk_token"] = draw(st.sampled_from([None, "", "absent", "<pad>"]))
    elif kind == "added" and isinstance(document.get("added_tokens"), list):
        document["added_tokens"].append(
            {
                "id": draw(size) % 2**32,
                "content": draw(st.sampled_from(["", "a", " ", "<bos>", "zebra"])),
                "single_word": draw(st.booleans()),
                "lstrip": draw(st.booleans()),
                "rstrip": draw(st.booleans()),
                "normalized": draw(st.booleans()),
                "special": draw(st.booleans()),
            }
        )
    elif kind == "processor":
        document["post_processor"] = draw(
            st.sampled_from(
                [
                    None,
                    {
                        "type": "TemplateProcessing",
                        "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                        "pair": [],
                        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [draw(size) % 2**32], "tokens": ["<bos>"]}},
                    },
                    {
                        "type": "RobertaProcessing",
                        "sep": ["</s>", draw(size) % 2**32],
                        "cls": ["<s>", 0],
                        "trim_offsets": True,
                        "add_prefix_space": True,
                    },
                    {"type": "Sequence", "processors": [{"type": "ByteLevel", "trim_offsets": True}] * draw(st.integers(0, 50))},
                ]
            )
        )
    elif kind == "key":
        key = draw(st.sampled_from(sorted(document)))
        if draw(st.booleans()):
            del document[key]
        else:
            document[key] = draw(st.sampled_from([None, 0, "", [], {}]))
    else:
        numbers = _numbers(document)
        if numbers:
            container, key = draw(st.sampled_from(numbers))
            container[key] = draw(st.sampled_from([*SIZES, -1, -(2**63), 2**64, 1e308, 0.5]))


@st.composite
def tokenizer_mutated(draw: Draw, seed: bytes) -> Mutant:
    """The seed's JSON with one to four structural mutations."""
    document = copy.deepcopy(json.loads(seed))
    for _ in range(draw(st.integers(1, 4))):
        if isinstance(document, dict) and isinstance(document.get("model"), dict):
            _mutate(draw, document)
    return Mutant(json.dumps(document, ensure_ascii=False).encode())
