"""The architecture's one exception to its import contract ([tool.importlinter] in pyproject.toml,
checked by `make check`): the compiled core `stoker._native` is a module of the root package that
the import graph cannot see, so ``from .. import _native`` reads as an import of `stoker` itself
and the contract ignores imports of the root package. This holds that exception to exactly that
import: a package that imported the root package for anything else (which imports every package)
would close a circle the contract no longer sees."""

from __future__ import annotations

import re

import grimp


def test_the_only_import_of_the_root_package_from_inside_it_is_the_compiled_core() -> None:
    graph = grimp.build_graph("stoker")
    others = []
    for module in sorted(graph.find_modules_that_directly_import("stoker")):
        for detail in graph.get_import_details(importer=module, imported="stoker"):
            if not re.fullmatch(r"from \.+ import _native", detail["line_contents"]):
                others.append(f"{module}, line {detail['line_number']}: {detail['line_contents']}")
    assert graph.find_modules_that_directly_import("stoker"), "the graph sees the core's imports (the check reads something)"
    assert not others, "import what you need from its own package, not from `stoker`:\n" + "\n".join(others)
