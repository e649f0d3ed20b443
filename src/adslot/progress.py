"""Progress of long commands (a forecast, a backup): a bar on a terminal, nothing when the output is piped or
redirected, so a script reading the command's output sees only the result."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

import click

STEPS = 1000
"""The bar's resolution: a tenth of a percent."""


@contextmanager
def progress_bar(label: str, stream: TextIO | None = None) -> Iterator[Callable[[float], None]]:
    """A callback taking the share done (0 to 1) that draws click's progress bar on `stream` (standard error
    by default) when it is a terminal, and does nothing otherwise."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield quiet
        return
    with click.progressbar(length=STEPS, label=label, file=out, show_eta=True) as bar:
        drawn = [0]

        def report(share: float) -> None:
            step = min(STEPS, max(0, int(share * STEPS)))
            if step > drawn[0]:
                bar.update(step - drawn[0])
                drawn[0] = step

        yield report


def quiet(share: float) -> None:
    """The callback when there is no terminal to draw on: a caller may skip what only the bar needs."""
