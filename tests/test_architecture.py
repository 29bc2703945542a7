"""The house's shape, held: folders by purpose that a reader can take in (no more than 15 source
files side by side), and the architecture's one exception to its import contract ([tool.importlinter] in pyproject.toml,
checked by `make check`): the compiled core `stoker._native` is a module of the root package that
the import graph cannot see, so ``from .. import _native`` reads as an import of `stoker` itself
and the contract ignores imports of the root package. This holds that exception to exactly that
import: a package that imported the root package for anything else (which imports every package)
would close a circle the contract no longer sees."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
MOST_FILES_SIDE_BY_SIDE = 15


def test_no_folder_holds_more_source_files_side_by_side_than_a_reader_takes_in() -> None:
    crowded = []
    for top in ("python/stoker", "src", "testbed", "tests", "benchmarks", "docs/examples"):
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if folder.is_dir() and "__pycache__" not in folder.parts and "regressions" not in folder.parts:
                files = [path for path in folder.iterdir() if path.suffix in (".py", ".rs") and path.name != "__init__.py"]
                if len(files) > MOST_FILES_SIDE_BY_SIDE:
                    crowded.append(f"{folder.relative_to(ROOT)}: {len(files)}")
    assert (ROOT / "python" / "stoker" / "loader").is_dir(), "the walk reads the tree (the check sees something)"
    assert not crowded, f"more than {MOST_FILES_SIDE_BY_SIDE} source files side by side; group them by purpose:\n" + "\n".join(crowded)


def test_the_only_import_of_the_root_package_from_inside_it_is_the_compiled_core() -> None:
    graph = grimp.build_graph("stoker")
    others = []
    for module in sorted(graph.find_modules_that_directly_import("stoker")):
        for detail in graph.get_import_details(importer=module, imported="stoker"):
            if not re.fullmatch(r"from \.+ import _native", detail["line_contents"]):
                others.append(f"{module}, line {detail['line_number']}: {detail['line_contents']}")
    assert graph.find_modules_that_directly_import("stoker"), "the graph sees the core's imports (the check reads something)"
    assert not others, "import what you need from its own package, not from `stoker`:\n" + "\n".join(others)


def _lines_with(pattern: str, *, outside: str) -> list[str]:
    """``file:line`` of every line of python/stoker matching ``pattern``, but in package ``outside``."""
    found = []
    for path in sorted((ROOT / "python" / "stoker").rglob("*.py")):
        if outside in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(pattern, line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_every_logger_shows_outside_text_escaped() -> None:
    # A record's arguments carry keys, file names and servers' messages: a logger taken any other
    # way than stoker._bounded.shown_logger would print their ESC and newlines raw.
    assert _lines_with(r"shown_logger\(", outside="_bounded"), "the check reads the loggers (it sees something)"
    loggers = _lines_with(r"logging\.getLogger\(", outside="_bounded")
    assert not loggers, "take a logger with stoker._bounded.shown_logger:\n" + "\n".join(loggers)


def test_every_folder_walk_is_the_shared_one() -> None:
    # A folder walk of another kind (os.walk, rglob, a recursive glob) loops on a link cycle or
    # lists one file under many paths; stoker._bounded's walks name a cycle and skip it.
    assert _lines_with(r"walk_files\(|matching_files\(", outside="_bounded"), "the check reads the walks (it sees something)"
    walks = _lines_with(r"os\.walk\(|\.rglob\(|glob\(.*recursive=True", outside="_bounded")
    assert not walks, "walk a folder with stoker._bounded.walk_files or matching_files:\n" + "\n".join(walks)


def test_every_json_read_from_outside_is_the_bounded_one() -> None:
    # json.loads meets a file nested 100,000 deep with a RecursionError, a number of 5,000 digits
    # with the interpreter's digit-limit ValueError, and holds a file of any size: outside JSON is
    # read with stoker._bounded.parse_json or read_json. What stoker's own child processes write
    # back (the LMDB walk, Lance's and the peers' helpers) is stoker's, not outside input.
    assert _lines_with(r"parse_json\(|read_json\(", outside="_bounded"), "the check reads the readers (it sees something)"
    own_children = ("_lmdb_walk.py", "_lance.py", "_peers.py")
    reads = [line for line in _lines_with(r"json\.loads?\(", outside="_bounded") if not line.split(":")[0].endswith(own_children)]
    assert not reads, "read outside JSON with stoker._bounded.parse_json or read_json:\n" + "\n".join(reads)
