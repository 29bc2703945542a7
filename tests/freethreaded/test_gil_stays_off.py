"""On free-threaded CPython (3.14t), importing stoker and each of its packages leaves the GIL off.

A free-threaded interpreter turns the GIL back on, with a warning, when it imports an extension
module that does not declare it can run without it: stoker's two native modules declare
``gil_used = false``, and this checks that the claim holds for all of stoker, each package
imported in a fresh interpreter (one import cannot hide behind another's). A package whose own
optional dependency is missing here (torch, Ray, JAX, a trainer) is named as skipped, never
counted as passing. ``make test-free-threaded`` runs this on the 3.14t build; on a GIL build it
is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
import sysconfig

import pytest

import stoker

pytestmark = pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="needs a free-threaded interpreter (make test-free-threaded)"
)

# Each package imported in turn, the GIL asked after each: the first that turns it on is named
# (an interpreter started per package took 3-6 s each on 2 loaded cores, for the same verdict).
CHECK = """
import importlib, json, sys, warnings
warnings.simplefilter("error", RuntimeWarning)  # the interpreter warns as it turns the GIL on
seen = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError as error:
        cause = error if isinstance(error, ModuleNotFoundError) else error.__cause__
        missing = cause.name if isinstance(cause, ModuleNotFoundError) else None
        if not missing or missing.split(".")[0] == "stoker":
            raise
        seen[name] = {"missing": missing}
    else:
        seen[name] = {"gil": sys._is_gil_enabled()}
print(json.dumps(seen))
"""
# PYTHON_GIL=1 would turn the GIL on whatever stoker does.
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHON_GIL"}


def packages() -> list[str]:
    """stoker and every public package in it (private modules come with their package)."""
    names = ["stoker"]
    for module in pkgutil.walk_packages(stoker.__path__, "stoker."):
        if module.ispkg and not any(part.startswith("_") for part in module.name.split(".")):
            names.append(module.name)
    return names


@pytest.fixture(scope="module")
def imported() -> dict[str, dict[str, object]]:
    """Each package's import in one fresh interpreter: the GIL after it, or the module it lacks."""
    done = subprocess.run([sys.executable, "-c", CHECK, *packages()], capture_output=True, text=True, timeout=600, env=ENVIRONMENT)
    assert done.returncode == 0, done.stderr
    seen: dict[str, dict[str, object]] = json.loads(done.stdout.splitlines()[-1])
    return seen


@pytest.mark.parametrize("package", packages())
def test_importing_it_leaves_the_gil_off(package: str, imported: dict[str, dict[str, object]]) -> None:
    seen = imported[package]
    if "missing" in seen:
        pytest.skip(f"{package} needs {seen['missing']}, not installed in this free-threaded venv")
    assert seen["gil"] is False, f"importing {package} turned the GIL on"


def test_the_native_modules_are_built_for_this_interpreter() -> None:
    """The free-threaded build has its own native module (an abi3 one cannot load here)."""
    from stoker import _native

    assert _native.__file__.endswith(sysconfig.get_config_var("EXT_SUFFIX")), _native.__file__
