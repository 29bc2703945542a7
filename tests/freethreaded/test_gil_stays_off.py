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

CHECK = """
import importlib, json, sys, warnings
warnings.simplefilter("error", RuntimeWarning)  # the interpreter warns as it turns the GIL on
try:
    importlib.import_module(sys.argv[1])
except ModuleNotFoundError as error:
    if (error.name or "").split(".")[0] == "stoker":
        raise
    print(json.dumps({"missing": error.name}))
else:
    print(json.dumps({"gil": sys._is_gil_enabled()}))
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


@pytest.mark.parametrize("package", packages())
def test_importing_it_leaves_the_gil_off(package: str) -> None:
    done = subprocess.run([sys.executable, "-c", CHECK, package], capture_output=True, text=True, timeout=120, env=ENVIRONMENT)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    if "missing" in seen:
        pytest.skip(f"{package} needs {seen['missing']}, not installed in this free-threaded venv")
    assert seen["gil"] is False, f"importing {package} turned the GIL on:\n{done.stderr}"


def test_the_native_modules_are_built_for_this_interpreter() -> None:
    """The free-threaded build has its own native module (an abi3 one cannot load here)."""
    from stoker import _native

    assert _native.__file__.endswith(sysconfig.get_config_var("EXT_SUFFIX")), _native.__file__
