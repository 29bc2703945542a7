"""What the torchrun training script (tests/distributed/train.py) logged, across hosts too:
each rank appends ``{"run", "step", "keys"}`` per step to ``WORK/log-<run>-<rank>.jsonl``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

__all__ = ["delivered"]


def delivered(work: Path, run: int, up_to_step: int | None) -> Counter[str]:
    """Keys delivered by ``run`` at steps up to ``up_to_step`` (None: all), over its ranks."""
    seen: Counter[str] = Counter()
    for path in work.glob(f"log-{run}-*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if up_to_step is None or entry["step"] <= up_to_step:
                seen.update(entry["keys"])
    return seen
