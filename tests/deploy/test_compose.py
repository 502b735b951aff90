"""docker-compose.yml and the Dockerfile agree with the code they start.

No Docker here: these tests read the files and parse every command with the CLI that will run
it (ktune's Typer app, Ray's click CLI), so a renamed flag, an unknown backend, a setting the
service no longer reads or a build argument the Dockerfile lacks fails here, not at
`docker compose up`."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from ktune.cli.app import app
from ktune.server.settings import Settings
from ktune.tuner.measure.ray_pool import ADDRESS_ENV
from ktune.tuner.sources import BACKENDS
from tests.optional import require

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

_VARIABLE = re.compile(r"\$\{(\w+)(?::([?-])([^}]*))?\}")
#: values for the variables compose requires (`${VAR:?message}`), as a user would set them
_REQUIRED = {"KTUNE_DB_PASSWORD": "db-password-for-tests", "KTUNE_API_TOKENS": "x" * 24}


def _interpolate(value: Any) -> Any:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}`, with no variable set but the
    required ones."""
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name, kind, rest = match.groups()
            if kind == "?":
                return _REQUIRED[name]
            return rest if kind == "-" else ""

        return _VARIABLE.sub(one, value)
    if isinstance(value, dict):
        return {k: _interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v) for v in value]
    return value


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(COMPOSE.read_text())
    return {name: _interpolate(spec) for name, spec in doc["services"].items()}


def _ktune_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if s.get("command", [""])[0] == "ktune"}


def _parse(group: Any, args: list[str]) -> Any:
    """The context of a subcommand given ``args``, parsed as its CLI would without running it
    (click's, or the copy of click that Typer carries: both have these methods)."""
    name, *rest = args
    command = group.get_command(group.context_class(group), name)
    assert command is not None, f"no such command: {name}"
    return command.make_context(name, rest)


def _check_parses(service: str, group: Any, args: list[str]) -> Any:
    try:
        return _parse(group, args[1:])
    except Exception as exc:  # noqa: BLE001 - click's usage errors, from either copy of click
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        pytest.fail(f"{service}: {' '.join(args)}: {message}")


def test_every_ktune_command_parses(services: dict[str, dict[str, Any]]) -> None:
    commands = _ktune_services(services)
    assert {"api", "worker", "cpu-worker", "ray-runner"} <= set(commands)
    group = typer.main.get_command(app)
    for name, spec in commands.items():
        ctx = _check_parses(name, group, spec["command"])
        for backend in ctx.params.get("backend") or ():
            assert backend in BACKENDS, f"{name}: unknown backend {backend}"


def test_runner_backends_are_the_ones_their_services_exist_for(
    services: dict[str, dict[str, Any]],
) -> None:
    def backends(name: str) -> list[str]:
        cmd = services[name]["command"]
        return [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--backend"]

    assert backends("cpu-worker") == ["cpu"]
    assert backends("ray-runner") == ["ray"]
    assert services["ray-runner"]["environment"][ADDRESS_ENV].startswith("ray://ray-head:")


def test_every_ray_command_parses(services: dict[str, dict[str, Any]]) -> None:
    scripts = require("ray.scripts.scripts")
    ray_services = {n: s for n, s in services.items() if s.get("command", [""])[0] == "ray"}
    assert {"ray-head", "ray-gpu"} <= set(ray_services)
    for name, spec in ray_services.items():
        checks = [spec["command"]]
        test = spec.get("healthcheck", {}).get("test", [])
        if test[:2] == ["CMD", "ray"]:
            checks.append(test[1:])
        for args in checks:
            _check_parses(name, scripts.cli, args)
    head = _parse(scripts.cli, ray_services["ray-head"]["command"][1:]).params
    # the runner's address and the GPU node's join address point at the head's ports
    assert (
        services["ray-runner"]["environment"][ADDRESS_ENV]
        == f"ray://ray-head:{head['ray_client_server_port']}"
    )
    assert f"ray-head:{head['port']}" in ray_services["ray-gpu"]["command"]


def test_every_ktune_variable_is_one_the_service_reads(services: dict[str, dict[str, Any]]) -> None:
    read = {f"KTUNE_{field.upper()}" for field in Settings.model_fields} | {ADDRESS_ENV}
    for name, spec in _ktune_services(services).items():
        unknown = {v for v in spec.get("environment", {}) if v.startswith("KTUNE_")} - read
        assert not unknown, f"{name} sets variables ktune does not read: {sorted(unknown)}"


def test_the_api_settings_load(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in [v for v in os.environ if v.startswith("KTUNE_")]:
        monkeypatch.delenv(var)
    for var, value in services["api"]["environment"].items():
        monkeypatch.setenv(var, str(value))
    monkeypatch.setenv("KTUNE_RECORDINGS_DIR", str(tmp_path))  # a mount in the container
    settings = Settings()
    assert settings.ray_address is None  # "${KTUNE_RAY_ADDRESS:-}": empty means no cluster
    assert settings.database_url and settings.database_url.startswith("postgresql://")
    assert set(settings.runner_backends) <= set(BACKENDS)


def test_one_image_with_the_extras_a_ray_cluster_needs(services: dict[str, dict[str, Any]]) -> None:
    dockerfile = DOCKERFILE.read_text()
    declared = set(re.findall(r"^ARG (\w+)", dockerfile, re.M))
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    builds = {n: s["build"] for n, s in services.items() if "build" in s}
    assert set(builds) == set(_ktune_services(services)) | {"ray-head", "ray-gpu"}
    assert len({repr(b) for b in builds.values()}) == 1, "services build different images"
    assert len({s["image"] for n, s in services.items() if n in builds}) == 1
    args = next(iter(builds.values()))["args"]
    assert set(args) <= declared
    assert set(args["EXTRAS"].split(",")) <= set(optional)
    assert {"gpu", "ray"} <= set(args["EXTRAS"].split(","))
    # the CPU operators' jobs need a C compiler in the image
    assert re.search(r'^ARG CC_PACKAGES="[^"]*\bgcc\b', dockerfile, re.M)
