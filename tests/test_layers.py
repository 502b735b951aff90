"""The layers of ktune, read from every import of every module (function-level ones too).

Dependencies point one way (docs/architecture.md): ``search_space`` and ``db`` import nothing
of ours; ``cost_model`` imports ``search_space``; ``tuner`` imports those three; ``server``
imports ``tuner`` and below; the public API in ``ktune`` re-exports what lives below it; the
CLI (``ktune.cli``; ``ktune.__main__`` only runs it) is the top layer and the only importer of
``server``. The shared test helpers (``ktune.testing``) may use everything but the CLI.
Registry strings such as ``"ktune.tuner.strategies.random_search:RandomSearch"`` are imports
too.

Beside the package: ``tests/`` and ``benchmarks/`` share helpers through ``ktune.testing``
and never import each other, and no test module imports another test module.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "ktune": "ktune",
    "tuner": "ktune.tuner",
    "cost_model": "ktune.cost_model",
    "search_space": "ktune.search_space",
    "server": "ktune.server",
    "db": "ktune.db",
}
BELOW_TUNER = {"ktune.tuner", "ktune.search_space", "ktune.db", "ktune.cost_model"}
#: a layer -> the layers it may import (every layer may import itself)
ALLOWED: dict[str, set[str]] = {
    "ktune.search_space": set(),
    "ktune.db": set(),
    "ktune.cost_model": {"ktune.search_space"},
    "ktune.tuner": BELOW_TUNER,
    "ktune.server": BELOW_TUNER,
    "ktune": BELOW_TUNER,  # the public API's modules
    "ktune.testing": {"ktune", *BELOW_TUNER, "ktune.server"},
    "ktune.cli": {"ktune", *BELOW_TUNER, "ktune.server"},
    # ``python -m ktune``: the console script's other door, so it sits on top with the CLI
    "ktune.__main__": {"ktune.cli"},
}
OLD_NAMES = re.compile(r"^(tuner|cost_model|search_space|server|db)(\.|$)")
REGISTRY = re.compile(r"^ktune(\.\w+)+(:\w+)?$")


def _modules() -> Iterator[tuple[str, Path]]:
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join((package, *parts)), path


def _layer(module: str) -> str:
    """The layer a module of ours belongs to: the longest layer name it starts with."""
    found = [lay for lay in ALLOWED if module == lay or module.startswith(lay + ".")]
    return max(found, key=len)


def imports(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) of every import in ``path``, relative ones resolved, names
    imported from a package counted as that package's submodules when they are modules."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if REGISTRY.match(node.value):
                yield node.lineno, node.value.split(":")[0]


def _ours(target: str, known: set[str]) -> str | None:
    """The module of ours that ``target`` names (``a.b.name`` -> ``a.b`` when ``name`` is
    not a module), or None for a module not of ours."""
    if target != "ktune" and not target.startswith("ktune."):
        return None
    while target not in known and "." in target:
        target = target.rpartition(".")[0]
    return target


def test_every_import_points_down_the_layers() -> None:
    modules = dict(_modules())
    known = set(modules)
    wrong = []
    for module, path in modules.items():
        mine = _layer(module)
        for line, target in imports(path, module):
            if OLD_NAMES.match(target):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} (not ktune.*)")
                continue
            theirs = _ours(target, known)
            if theirs is None:
                continue
            layer = _layer(theirs)
            if layer != mine and layer not in ALLOWED[mine]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {theirs}")
    assert wrong == []


@pytest.mark.parametrize(
    ("module", "target", "allowed"),
    [
        ("ktune.db.engine", "ktune.search_space.workload", False),
        ("ktune.cost_model.xgb", "ktune.search_space.space", True),
        ("ktune.cost_model.xgb", "ktune.db", False),
        ("ktune.tuner.jobs", "ktune.server.app", False),
        ("ktune.server.app", "ktune.tuner.runner", True),
        ("ktune.server.app", "ktune.cli.app", False),
        ("ktune", "ktune.server", False),
        ("ktune.cli.app", "ktune.server", True),
    ],
)
def test_the_rule_itself(module: str, target: str, allowed: bool) -> None:
    mine, theirs = _layer(module), _layer(target)
    assert (theirs == mine or theirs in ALLOWED[mine]) is allowed


def test_tests_and_benchmarks_share_helpers_and_do_not_import_each_other() -> None:
    wrong = []
    for folder, forbidden in (("tests", "benchmarks"), ("benchmarks", "tests")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for line, target in imports(path, module):
                head = target.split(".")
                if head[0] == forbidden:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
                elif folder == "tests" and any(p.startswith("test_") for p in head[1:]):
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports test module {target}")
    assert wrong == []
