"""The service's settings: one object, read from ``KTUNE_*`` environment variables, checked.

| variable | meaning |
|---|---|
| ``KTUNE_DATABASE_URL`` | the tuning log (default: the SQLite file of the CLI) |
| ``KTUNE_API_TOKENS`` | bearer tokens allowed to write, comma-separated (besides stored ones) |
| ``KTUNE_READS_NEED_TOKEN`` | reads need a token too (default: reads are open) |
| ``KTUNE_RUNNER_CONCURRENCY`` | jobs the server runs at once (0: leave jobs to ``ktune worker``) |
| ``KTUNE_RUNNER_BACKENDS`` | run only jobs of these backends, comma-separated (e.g. ``replay``); \
default: any |
| ``KTUNE_LEASE_SECONDS`` | how long a runner holds a job without renewing \
(a dead runner's job waits this long) |
| ``KTUNE_POLL_SECONDS`` | how often an idle runner looks for queued jobs |
| ``KTUNE_RECORDINGS_DIR`` | a directory of recorded spaces jobs may use, besides the bundled ones |
| ``KTUNE_MAX_BODY_BYTES`` | largest request body accepted |
| ``KTUNE_MAX_UPLOAD_BYTES`` | largest recording accepted by ``POST /v1/recordings`` \
(as sent: gzip counts compressed) |
| ``KTUNE_MAX_INFLATED_BYTES`` | largest recording once decompressed, default 64 MiB (a gzip \
bomb stops there; ``ktune import`` reads the same variable, default 256 MiB) |
| ``KTUNE_MAX_WORKLOAD_BYTES`` | most memory an operator job's arguments and reference may need, \
default 8 GiB (larger shapes answer 422; ``ktune tune`` reads the same variable) |
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ktune.tuner.bounds import MAX_CONCURRENCY, MAX_LEASE_S, MAX_POLL_S
from ktune.tuner.sources.footprint import DEFAULT_MAX_WORKLOAD_BYTES

__all__ = ["MIN_TOKEN_LENGTH", "Settings", "SettingsError"]

MIN_TOKEN_LENGTH = 16
_PLACEHOLDERS = {"changeme", "change-me", "secret", "token", "password", "example", "xxx"}


class SettingsError(ValueError):
    """Invalid settings; the message names the variables and never repeats a value."""


class Settings(BaseSettings):
    """Settings of ``ktune serve`` and ``ktune worker``; invalid values fail at start-up."""

    # an empty variable is an unset one (docker compose passes `${VAR:-}` as "")
    model_config = SettingsConfigDict(
        env_prefix="KTUNE_", extra="ignore", frozen=True, env_ignore_empty=True
    )

    database_url: str | None = None
    api_tokens: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    reads_need_token: bool = False
    runner_concurrency: int = Field(1, ge=0, le=MAX_CONCURRENCY)
    runner_backends: Annotated[tuple[str, ...], NoDecode] = ()
    lease_seconds: float = Field(30.0, gt=0, le=MAX_LEASE_S)
    poll_seconds: float = Field(1.0, gt=0, le=MAX_POLL_S)
    recordings_dir: Path | None = None
    #: the Ray cluster that measures operator jobs (POST /v1/jobs with ``operator``); none: no GPUs
    ray_address: str | None = Field(None, min_length=1, max_length=500)
    max_body_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    max_upload_bytes: int = Field(64 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    max_inflated_bytes: int = Field(64 * 1024 * 1024, ge=1024, le=16 * 1024 * 1024 * 1024)
    max_workload_bytes: int = Field(DEFAULT_MAX_WORKLOAD_BYTES, ge=1024 * 1024, le=1024**5)

    @field_validator("api_tokens", "runner_backends", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(t.strip() for t in value.split(",") if t.strip())
        return value

    @field_validator("api_tokens")
    @classmethod
    def _strong_tokens(cls, tokens: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        for i, token in enumerate(tokens):
            text = token.get_secret_value()
            if len(text) < MIN_TOKEN_LENGTH or text.lower() in _PLACEHOLDERS:
                # Never echo the token: say which one and why.
                raise ValueError(
                    f"API token #{i + 1} is too weak: use at least {MIN_TOKEN_LENGTH} random "
                    f"characters (e.g. from `ktune token create`)"
                )
            if any(c.isspace() for c in text):
                raise ValueError(f"API token #{i + 1} contains whitespace")
        return tokens

    @field_validator("runner_backends")
    @classmethod
    def _known_backends(cls, backends: tuple[str, ...]) -> tuple[str, ...]:
        from ktune.tuner.sources import BACKENDS, backend_unavailable

        unknown = [b for b in backends if b not in BACKENDS]
        if unknown:
            raise ValueError(
                f"unknown backend(s) {', '.join(map(repr, unknown))} "
                f"(choose from: {', '.join(BACKENDS)})"
            )
        for name in backends:
            if (reason := backend_unavailable(name)) is not None:
                raise ValueError(f"backend {name!r}: {reason}")
        return backends

    @field_validator("recordings_dir")
    @classmethod
    def _existing_dir(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        path = value.expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"recordings directory {path} does not exist")
        return path

    def token_values(self) -> tuple[str, ...]:
        return tuple(t.get_secret_value() for t in self.api_tokens)

    @classmethod
    def load(cls, **overrides: object) -> Settings:
        """Settings from the environment with ``overrides`` on top; :class:`SettingsError` if
        invalid.

        Pydantic's own message repeats the rejected input, which may be a token, so the
        message is rebuilt from the error locations and reasons only.
        """
        try:
            return cls(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
        except ValidationError as exc:
            problems = []
            for error in exc.errors(include_input=False, include_url=False):
                field = ".".join(str(part) for part in error["loc"]) or "settings"
                problems.append(
                    f"KTUNE_{field.upper()}: {error['msg'].removeprefix('Value error, ')}"
                )
            raise SettingsError("; ".join(problems)) from None
