"""Train/validation/test splits and k-fold cross-validation folds of sample ids.

Seeded (the same seed gives the same split), for any label values (strings, ints, None), with
class balance as asked and groups kept whole (every sample of one patient in one split).

How: samples are gathered into units (a group, or a single sample); with a balance other than
``"original"``, each label keeps a seeded random share of its units so the label proportions
match the target; the units are then ordered label by label (shuffled within a label) and each
goes to the split furthest below its quota. So every split's size stays within one unit of its
ratio, and every label is spread over the splits in the same proportions (stratified).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._bounded import MAX_MANIFEST_BYTES, read_json
from ..errors import ConfigurationError

__all__ = ["SPLITS_FORMAT", "k_folds", "read_split", "split_samples", "write_splits"]

SPLITS_FORMAT = "stoker.splits"
Balance = str | Mapping[Any, float]


def _sort_key(value: Any) -> tuple[str, str]:
    return (type(value).__name__, str(value))


def _units(ids: Sequence[str], labels: Sequence[Any], groups: Sequence[Hashable] | None) -> list[tuple[Any, list[int]]]:
    """(label, member positions) per unit; a group's label is its most common one."""
    if groups is None:
        return [(label, [position]) for position, label in enumerate(labels)]
    members: dict[Hashable, list[int]] = defaultdict(list)
    for position, group in enumerate(groups):
        members[group].append(position)
    units = []
    for group in sorted(members, key=_sort_key):
        counts = Counter(labels[position] for position in members[group])
        label = min(counts, key=lambda value: (-counts[value], _sort_key(value)))
        units.append((label, members[group]))
    return units


def _balanced(by_label: dict[Any, list[list[int]]], balance: Balance) -> dict[Any, list[list[int]]]:
    """Keep, per label, the leading units (already shuffled) up to the label's target count."""
    if balance == "original":
        return by_label
    sizes = {label: sum(len(unit) for unit in units) for label, units in by_label.items()}
    if balance == "uniform":
        weights: Mapping[Any, float] = {label: 1.0 for label in by_label}
    elif isinstance(balance, Mapping):
        unknown = [label for label in by_label if label not in balance and str(label) not in balance]
        if unknown:
            raise ConfigurationError(f"no weight for labels {sorted(map(str, unknown))}; give every label a weight (0 drops it)")
        weights = {label: float(balance.get(label, balance.get(str(label), 0.0))) for label in by_label}
    else:
        raise ConfigurationError(f'balance must be "original", "uniform" or a mapping of label to weight, got {balance!r}')
    positive = {label: weight for label, weight in weights.items() if weight > 0}
    if not positive:
        raise ConfigurationError("every label weight is zero")
    # The largest total whose label proportions follow the weights with the samples we have.
    scale = min(sizes[label] / weight for label, weight in positive.items())
    kept: dict[Any, list[list[int]]] = {}
    for label, units in by_label.items():
        target = int(positive.get(label, 0.0) * scale + 1e-9)
        chosen, count = [], 0
        for unit in units:
            if count + len(unit) <= target:
                chosen.append(unit)
                count += len(unit)
        kept[label] = chosen
    return kept


def split_samples(
    ids: Sequence[str],
    labels: Sequence[Any] | None = None,
    *,
    ratios: Mapping[str, float],
    balance: Balance = "original",
    groups: Sequence[Hashable] | None = None,
    seed: int = 0,
) -> dict[str, list[str]]:
    """Split ``ids`` into named parts.

    Args:
        ids: Sample ids (keys).
        labels: One label per id, any values (None: no stratification).
        ratios: Part name -> share, e.g. ``{"train": 0.8, "val": 0.1, "test": 0.1}`` (normalised).
        balance: ``"original"`` keeps the label proportions of the data; ``"uniform"`` keeps as
            many samples of each label as the rarest has; a mapping of label to weight keeps
            proportions following the weights (0 drops a label). Samples left out by balancing
            are in no part.
        groups: One group per id; a group's samples all go to one part.
        seed: The same seed gives the same split.

    Returns:
        Part name -> ids, each part in a seeded random order.

    Raises:
        ValueError: Lengths that differ, duplicate ids, non-positive ratios, a bad balance.
    """
    labels = list(labels) if labels is not None else [None] * len(ids)
    if len(labels) != len(ids) or (groups is not None and len(groups) != len(ids)):
        raise ConfigurationError("ids, labels and groups must have the same length")
    if len(set(ids)) != len(ids):
        raise ConfigurationError("ids must be unique")
    if not ratios or any(share <= 0 for share in ratios.values()):
        raise ConfigurationError(f"ratios must be positive, got {dict(ratios)}")
    generator = random.Random(seed)
    by_label: dict[Any, list[list[int]]] = defaultdict(list)
    for label, members in _units(ids, labels, groups):
        by_label[label].append(members)
    for label in sorted(by_label, key=_sort_key):
        generator.shuffle(by_label[label])
    by_label = _balanced(by_label, balance)
    total_share = sum(ratios.values())
    shares = {name: share / total_share for name, share in ratios.items()}
    parts: dict[str, list[int]] = {name: [] for name in ratios}
    assigned = 0
    for label in sorted(by_label, key=_sort_key):
        for unit in by_label[label]:
            assigned += len(unit)
            # The part furthest below its quota once this unit is counted.
            name = max(parts, key=lambda part: shares[part] * assigned - len(parts[part]))
            parts[name].extend(unit)
    out = {}
    for name, positions in parts.items():
        generator.shuffle(positions)
        out[name] = [ids[position] for position in positions]
    return out


def k_folds(
    ids: Sequence[str],
    labels: Sequence[Any] | None = None,
    *,
    k: int,
    balance: Balance = "original",
    groups: Sequence[Hashable] | None = None,
    seed: int = 0,
) -> dict[str, list[str]]:
    """K-fold cross-validation: ``fold{i}/val`` is the i-th of k stratified parts and
    ``fold{i}/train`` the other k-1.

    Raises:
        ValueError: ``k`` under 2 or over the number of samples (a fold would be empty), or what
            `split_samples` raises.
    """
    if k < 2:
        raise ConfigurationError(f"k must be at least 2, got {k}")
    if k > len(ids):
        raise ConfigurationError(f"k={k:,} folds of {len(ids):,} samples: a fold would be empty (k is at most the number of samples)")
    parts = split_samples(ids, labels, ratios={f"part{i}": 1.0 for i in range(k)}, balance=balance, groups=groups, seed=seed)
    folds: dict[str, list[str]] = {}
    for i in range(k):
        folds[f"fold{i}/train"] = [key for j in range(k) if j != i for key in parts[f"part{j}"]]
        folds[f"fold{i}/val"] = parts[f"part{i}"]
    return folds


def write_splits(path: str | os.PathLike[str], splits: Mapping[str, Sequence[str]], **settings: Any) -> Path:
    """Save ``splits`` (and the ``settings`` that made them, for the record) as JSON, atomically."""
    target = Path(path)
    document = {"format": SPLITS_FORMAT, "version": 1, **settings, "splits": {name: list(keys) for name, keys in splits.items()}}
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(json.dumps(document))
    temporary.replace(target)
    return target


def read_split(path: str | os.PathLike[str], name: str) -> list[str]:
    """The ids of part ``name`` (e.g. ``"train"``, ``"fold2/val"``) of a splits file.

    Raises:
        ValueError: Not a splits file (or past the JSON reader's bounds: `stoker.errors.JsonError`),
            or no such part (the parts are listed).
    """
    document = read_json(path, what="a splits file", max_bytes=MAX_MANIFEST_BYTES)  # every sample's id, as a manifest
    splits = document.get("splits") if isinstance(document, dict) else None
    if not isinstance(document, dict) or document.get("format") != SPLITS_FORMAT or not isinstance(splits, dict):
        raise ConfigurationError(f"{path}: not a {SPLITS_FORMAT} file")
    if name not in splits:
        raise ConfigurationError(f"{path}: no split {name!r}; it has {sorted(splits)[:20]}")
    ids = splits[name]
    if not isinstance(ids, list) or not all(isinstance(sample, str) for sample in ids):
        raise ConfigurationError(f"{path}: split {name!r} is not a list of ids")
    return list(ids)
