"""Models of ``/v1/recordings``: what importing an uploaded recording did."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["RecordingImported"]


class RecordingImported(BaseModel):
    job: int = Field(
        description="The import job that holds the recording's measurements as its trials."
    )
    workload: str
    device: str
    records: int = Field(
        description="Configurations in the recording, failed and invalid ones included."
    )
    ok: int = Field(description="Configurations that ran successfully.")
    already: bool = Field(
        description="The same file was imported before: nothing was written (200, not 201)."
    )
