"""Split properties: ratios within one sample, groups never split, same seed same split, balance
as asked, any label values, k-fold partitions, the file the loader reads."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from stoker.sampling import k_folds, read_split, split_samples, write_splits


def labelled(count: int, weights: dict[str, float], seed: int = 0) -> tuple[list[str], list[str]]:
    generator = random.Random(seed)
    names = list(weights)
    labels = generator.choices(names, weights=list(weights.values()), k=count)
    return [f"sample-{index:05d}" for index in range(count)], labels


@pytest.mark.parametrize("count", [7, 100, 1001])
@pytest.mark.parametrize("ratios", [{"train": 0.8, "val": 0.1, "test": 0.1}, {"a": 1, "b": 1, "c": 1}, {"train": 0.7, "val": 0.3}])
def test_every_sample_once_and_ratios_within_one_sample(count: int, ratios: dict[str, float]) -> None:
    ids, labels = labelled(count, {"cat": 5, "dog": 3, "eel": 1})
    parts = split_samples(ids, labels, ratios=ratios, seed=4)
    assert sorted(key for part in parts.values() for key in part) == sorted(ids)
    total = sum(ratios.values())
    for name, share in ratios.items():
        assert abs(len(parts[name]) - count * share / total) <= 1, (name, len(parts[name]))


def test_original_balance_keeps_label_proportions_in_every_split() -> None:
    ids, labels = labelled(3000, {"cat": 6, "dog": 3, "eel": 1})
    label_of = dict(zip(ids, labels))
    overall = Counter(labels)
    parts = split_samples(ids, labels, ratios={"train": 0.8, "val": 0.2}, seed=1)
    for name, share in (("train", 0.8), ("val", 0.2)):
        counts = Counter(label_of[key] for key in parts[name])
        for label, total in overall.items():
            assert abs(counts[label] - total * share) <= 2, (name, label)


def test_uniform_balance_keeps_as_many_of_each_label_as_the_rarest() -> None:
    ids, labels = labelled(2000, {"cat": 6, "dog": 3, "eel": 1})
    label_of = dict(zip(ids, labels))
    rarest = min(Counter(labels).values())
    parts = split_samples(ids, labels, ratios={"train": 0.5, "test": 0.5}, balance="uniform", seed=2)
    kept = Counter(label_of[key] for part in parts.values() for key in part)
    assert set(kept.values()) == {rarest}
    for part in parts.values():
        counts = Counter(label_of[key] for key in part)
        assert max(counts.values()) - min(counts.values()) <= 2


def test_weighted_balance_follows_the_weights() -> None:
    ids, labels = labelled(2000, {"cat": 1, "dog": 1, "eel": 1})
    label_of = dict(zip(ids, labels))
    parts = split_samples(ids, labels, ratios={"all": 1}, balance={"cat": 1, "dog": 2, "eel": 0}, seed=0)
    kept = Counter(label_of[key] for key in parts["all"])
    assert kept["eel"] == 0
    assert abs(kept["dog"] - 2 * kept["cat"]) <= 2
    with pytest.raises(ValueError, match="no weight for labels"):
        split_samples(ids, labels, ratios={"all": 1}, balance={"cat": 1})


def test_groups_are_never_split_and_sizes_stay_within_a_group() -> None:
    generator = random.Random(3)
    ids, groups, labels = [], [], []
    for patient in range(120):
        for scan in range(generator.randint(1, 6)):
            ids.append(f"p{patient}/scan{scan}")
            groups.append(f"p{patient}")
            labels.append("sick" if patient % 4 == 0 else "well")
    parts = split_samples(ids, labels, ratios={"train": 0.6, "val": 0.2, "test": 0.2}, groups=groups, seed=9)
    group_of = dict(zip(ids, groups))
    home = {}
    for name, part in parts.items():
        for key in part:
            assert home.setdefault(group_of[key], name) == name, f"{group_of[key]} is in two splits"
    assert sum(map(len, parts.values())) == len(ids)
    for name, share in (("train", 0.6), ("val", 0.2), ("test", 0.2)):
        assert abs(len(parts[name]) - share * len(ids)) <= 6  # the largest group


def test_same_seed_same_split_and_another_seed_another() -> None:
    ids, labels = labelled(500, {"a": 1, "b": 1})
    first = split_samples(ids, labels, ratios={"train": 0.9, "val": 0.1}, seed=11)
    assert split_samples(ids, labels, ratios={"train": 0.9, "val": 0.1}, seed=11) == first
    assert split_samples(ids, labels, ratios={"train": 0.9, "val": 0.1}, seed=12)["val"] != first["val"]


def test_any_label_values() -> None:
    ids = [f"s{index}" for index in range(60)]
    labels = [[None, 3, "benign", 7.5][index % 4] for index in range(60)]
    parts = split_samples(ids, labels, ratios={"train": 2, "test": 1}, seed=0)
    label_of = dict(zip(ids, labels))
    for label in (None, 3, "benign", 7.5):
        assert sum(label_of[key] == label for key in parts["test"]) == 5


def test_k_folds_partition_the_samples() -> None:
    ids, labels = labelled(103, {"a": 2, "b": 1})
    groups = [key[:-1] for key in ids]  # ten-sample groups
    folds = k_folds(ids, labels, k=5, groups=groups, seed=0)
    validation = [key for i in range(5) for key in folds[f"fold{i}/val"]]
    assert sorted(validation) == sorted(ids)  # each sample validates exactly once
    for i in range(5):
        assert not set(folds[f"fold{i}/train"]) & set(folds[f"fold{i}/val"])
        assert len(folds[f"fold{i}/train"]) + len(folds[f"fold{i}/val"]) == len(ids)


def test_the_splits_file_round_trips(tmp_path: Path) -> None:
    ids, labels = labelled(50, {"a": 1, "b": 1})
    parts = split_samples(ids, labels, ratios={"train": 0.8, "val": 0.2})
    path = write_splits(tmp_path / "splits.json", parts, seed=0)
    assert read_split(path, "val") == parts["val"]
    with pytest.raises(ValueError, match=r"no split 'test'; it has \['train', 'val'\]"):
        read_split(path, "test")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        split_samples(["a", "a"], ratios={"x": 1})
    with pytest.raises(ValueError, match="positive"):
        split_samples(["a"], ratios={"x": 0})
    with pytest.raises(ValueError, match="same length"):
        split_samples(["a", "b"], [1], ratios={"x": 1})
