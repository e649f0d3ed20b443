"""Stopping a worker's background tasks (sweeps, retention passes, metrics flushes, reloads, lease draws)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def stop_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel each task (None: none), then wait until each has unwound: a stop that returned while a task
    still ran would let it touch what its owner closes next."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
