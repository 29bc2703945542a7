"""The slowest tests of a `make test` run, from the JUnit files its pytest runs wrote.

Usage: python packaging/slowest_tests.py COUNT FILE.xml [FILE.xml ...]

Each of `make test`'s two pytest runs (side by side, then alone: tests/scheduling.py) writes one
file; this prints the slowest ``COUNT`` tests over both, with the part each ran in, so a test that
grew slow shows wherever it runs, and then the ``COUNT`` that took the most CPU (tests/conftest.py
records it: the test's process and the children it reaped): on two cores, CPU is what a parallel
run's length is made of, and a test that waits long costs little.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def main(arguments: list[str]) -> None:
    count, files = int(arguments[0]), [Path(name) for name in arguments[1:]]
    timed: list[tuple[float, str, str]] = []
    busy: list[tuple[float, str, str]] = []
    for file in files:
        if not file.exists():
            continue
        for case in ElementTree.parse(file).getroot().iter("testcase"):
            name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            timed.append((float(case.get("time") or 0.0), name, file.stem))
            cpu = [float(item.get("value") or 0.0) for item in case.iter("property") if item.get("name") == "cpu_seconds"]
            if cpu:
                busy.append((cpu[0], name, file.stem))
    for title, rows in (("slowest tests (seconds; setup and teardown included)", timed), ("tests that took the most CPU (seconds)", busy)):
        rows.sort(reverse=True)
        if rows:
            print(f"== the {min(count, len(rows))} {title}; {sum(row[0] for row in rows) / 60:.0f} min in all ==")
        for seconds, name, part in rows[:count]:
            print(f"{seconds:8.1f}  {part:8}  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
