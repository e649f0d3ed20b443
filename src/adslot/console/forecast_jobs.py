"""Forecasts as background jobs: the console starts one and shows its progress, and the user may leave, come
back to the result, or cancel it.

A job is one JSON file under the environment's data directory, written whole and renamed into place, so any
worker process (the one that started it or not) reads a complete state: running with its progress, done with
the report, failed with the error, or cancelled. Cancelling leaves a marker file that the forecast's
progress callback looks for; the forecast then stops at its next virtual minute.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from adslot.errors import ApiError
from adslot.simulation.forecast import ForecastReport

State = Literal["running", "done", "failed", "cancelled"]
JOB_ID = re.compile(r"[0-9a-f]{16}")
KEPT_SECONDS = 24 * 3600
"""Jobs older than this are removed when a new one starts."""
REPORT_EVERY = 0.01
"""The progress is written each time it grows by this share (and at the end)."""


class JobError(msgspec.Struct, frozen=True):
    status: int
    code: str
    message: str
    field: str | None = None

    def as_api_error(self) -> ApiError:
        return ApiError(self.status, self.code, self.message, self.field)


class Job(msgspec.Struct, frozen=True):
    state: State
    started_at: int
    form: dict[str, str]
    """The form the forecast was asked with, shown again beside its result."""
    progress: float = 0.0
    """Share of the slots decided, 0 to 1."""
    report: ForecastReport | None = None
    error: JobError | None = None


class Cancelled(Exception):
    """The user cancelled the job."""


class Jobs:
    """An environment's forecast jobs, in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, job_id: str, suffix: str = ".json") -> Path:
        if not JOB_ID.fullmatch(job_id):
            raise KeyError(job_id)
        return self.folder / f"{job_id}{suffix}"

    def create(self, form: dict[str, str], now: int | None = None) -> str:
        """A new running job's id; jobs older than KEPT_SECONDS are removed first."""
        self.folder.mkdir(parents=True, exist_ok=True)
        started = int(time.time()) if now is None else now
        for old in self.folder.glob("*.json"):
            if old.stat().st_mtime < started - KEPT_SECONDS:
                old.unlink(missing_ok=True)
                old.with_suffix(".cancel").unlink(missing_ok=True)
        job_id = secrets.token_hex(8)
        self.write(job_id, Job("running", started, form))
        return job_id

    def write(self, job_id: str, job: Job) -> None:
        path = self._path(job_id)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_bytes(msgspec.json.encode(job))
        os.replace(scratch, path)

    def read(self, job_id: str) -> Job | None:
        """The job, or None for an unknown (or malformed) id."""
        try:
            return msgspec.json.decode(self._path(job_id).read_bytes(), type=Job)
        except (KeyError, FileNotFoundError, msgspec.DecodeError):
            return None

    def cancel(self, job_id: str) -> bool:
        """Ask a running job to stop; False if there is no such running job."""
        job = self.read(job_id)
        if job is None or job.state != "running":
            return False
        self._path(job_id, ".cancel").touch()
        return True

    def cancelled(self, job_id: str) -> bool:
        return self._path(job_id, ".cancel").exists()

    def recent(self, limit: int = 10) -> list[tuple[str, Job]]:
        """The latest jobs, newest first."""
        if not self.folder.is_dir():
            return []
        paths = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:limit]
        found = [(p.stem, self.read(p.stem)) for p in paths]
        return [(job_id, job) for job_id, job in found if job is not None]

    def reporter(self, job_id: str) -> Callable[[float], None]:
        """The forecast's progress callback: writes the share as it grows, and raises Cancelled once the job
        was cancelled."""
        job = self.read(job_id)
        if job is None:
            raise KeyError(job_id)
        written = [0.0]

        def report(share: float) -> None:
            if share - written[0] < REPORT_EVERY and share < 1.0:
                return
            if self.cancelled(job_id):
                raise Cancelled(job_id)
            written[0] = share
            self.write(job_id, msgspec.structs.replace(job, progress=share))

        return report

    def finish(self, job_id: str, run: Callable[[Callable[[float], None]], ForecastReport]) -> None:
        """Run the forecast `run(progress)` and store how it ended."""
        job = self.read(job_id)
        if job is None:
            raise KeyError(job_id)
        try:
            report = run(self.reporter(job_id))
        except Cancelled:
            self.write(job_id, msgspec.structs.replace(job, state="cancelled"))
        except ApiError as exc:
            error = JobError(exc.status, exc.code, exc.message, exc.field)
            self.write(job_id, msgspec.structs.replace(job, state="failed", error=error))
        else:
            self.write(job_id, msgspec.structs.replace(job, state="done", progress=1.0, report=report))
