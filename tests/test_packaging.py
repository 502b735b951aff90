"""ktune installs as one root package, ``ktune``, that no user module can shadow.

The wheel is built from the tree (as ``pip install ktune`` would), installed into a fresh
virtual environment that borrows only the dependencies of this one, and run from a folder
that holds a user's own ``ktune.db.py``, ``ktune.server.py`` and ``ktune.tuner.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: repository folder -> the package it installs as
FOLDERS = {
    "ktune": "ktune",
    "tuner": "ktune.tuner",
    "cost_model": "ktune.cost_model",
    "search_space": "ktune.search_space",
    "server": "ktune.server",
    "db": "ktune.db",
}
pytestmark = pytest.mark.slow


def _tree_packages() -> set[str]:
    """Every package of the tree (a folder with ``__init__.py``), by its installed name."""
    found = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    return found


def test_pyproject_lists_every_package_of_the_tree() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == _tree_packages()
    assert config["package-dir"] == {name: folder for folder, name in FOLDERS.items()}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of what the wheel is made of: setuptools writes build/ and egg-info
    # into the tree it builds, and two workers building the checkout at once (or a build that
    # died half-way there before) made `pip wheel` fail with "File exists".
    src = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"pip wheel failed: {done.stderr[-3000:]}"
    (built,) = out.glob("ktune-*.whl")
    return built


def test_the_wheel_holds_ktune_and_nothing_else_of_ours(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"ktune", wheel.name.split("-py3")[0] + ".dist-info"}
    sources = {
        f"{FOLDERS[folder].replace('.', '/')}/{p.relative_to(ROOT / folder).as_posix()}"
        for folder in FOLDERS
        for p in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert sources <= set(names)
    data = [
        "ktune/py.typed",
        "ktune/search_space/recorded/convolution_A4000.json.gz",
        "ktune/search_space/operators/cuda/matmul_mma.cu",
        "ktune/search_space/operators/cpu/c/matmul.c",
        "ktune/db/migrations/script.py.mako",
        "ktune/cost_model/catalog.json",
        "ktune/server/static/index.html",
    ]
    assert set(data) <= set(names)


def test_installed_ktune_runs_beside_a_users_own_db_server_and_tuner(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # The dependencies come from this environment; its own (editable) ktune does not: the
    # paths a .pth file adds are not site directories, so their .pth files are not run.
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    user = tmp_path / "project"
    user.mkdir()
    for name in ("db.py", "server.py", "tuner.py"):
        (user / name).write_text("raise SystemExit('the user module was imported')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["KTUNE_DATABASE_URL"] = f"sqlite:///{tmp_path / 'ktune.db'}"

    def run(*argv: str | Path) -> str:
        done = subprocess.run(
            [*argv], cwd=user, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = run(python, "-c", "import ktune, ktune.db, ktune.tuner; print(ktune.__file__)")
    assert where.strip().startswith(str(site))
    assert "tune" in run(venv / "bin" / "ktune", "--help")
    tuned = run(venv / "bin" / "ktune", "tune", "--replay", "convolution_A4000", "--budget", "5",
                "--seed", "1", "--quiet")  # fmt: skip
    assert "measurements  5" in tuned
