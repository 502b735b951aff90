"""Optional dependencies of the suite (Ray, schemathesis): a test that needs a missing one is
skipped with the reason, unless its ``KTUNE_REQUIRE_*`` variable is set (as CI sets them), in
which case it fails instead."""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

import pytest

#: module -> (the variable that makes it required, how to install it)
REQUIREMENTS = {
    "ray": ("KTUNE_REQUIRE_RAY", "pip install -e '.[ray]'"),
    "schemathesis": ("KTUNE_REQUIRE_SCHEMATHESIS", "pip install -e '.[dev]'"),
}


def require(module: str) -> ModuleType:
    """``module`` imported (``ray``, ``schemathesis`` or one of their submodules). When it
    cannot be, the calling test, or test module when called at import, is skipped saying why;
    where the package's ``KTUNE_REQUIRE_*`` variable is set, it fails instead."""
    __tracebackhide__ = True  # a skip or failure points at the test that needs the module
    env, install = REQUIREMENTS[module.split(".", 1)[0]]
    try:
        with warnings.catch_warnings():  # as pytest.importorskip: their import-time warnings
            warnings.simplefilter("ignore")  # (Ray's pydantic deprecations) are not ours
            return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{module} is not installed ({install}): {exc}"
    if os.environ.get(env):
        pytest.fail(f"{env} is set but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
