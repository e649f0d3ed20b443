"""Logs: one shape for every line, configured once per process (`adslot serve`, each worker, create_app).

structlog renders JSON lines (ADSLOT_LOG_FORMAT=json) or readable text (the default); every standard
`logging` record, adslot's own (`logging.getLogger` throughout) and uvicorn's, goes through structlog's
ProcessorFormatter, so each line has a timestamp, level, logger and event, and the request_id of the
request being served (edge/request_ids.py) when it was written inside one.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from adslot.edge.request_ids import REQUEST_ID
from adslot.settings import DEFAULTS, SettingsError, load_settings
from adslot.telemetry.redact import RedactingRenderer, redact_secrets

UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
ACCESS_LOGGER = "uvicorn.access"


def add_request_id(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """The id of the request being served, read only when a line is written."""
    request_id = REQUEST_ID.get()
    if request_id is not None:
        event_dict.setdefault("request_id", request_id.decode("ascii"))
    return event_dict


class _AdslotHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler configure_logging installs on the root logger, recognised to be replaced."""


def configure_logging(log_format: str, level: str, stream: TextIO | None = None) -> None:
    """Route every log record of this process through structlog as `log_format` (`text` or `json`) lines
    at `level` and above, on `stream` (stderr). Called again, it replaces its own handler, nobody else's."""
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        add_request_id,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Callable[[WrappedLogger, str, EventDict], str | bytes]
    tracebacks: Processor
    if log_format == "json":
        renderer = structlog.processors.JSONRenderer()
        tracebacks = structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
    else:
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
        tracebacks = structlog.processors.format_exc_info  # the plain traceback, without locals
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = _AdslotHandler(stream or sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                tracebacks,
                redact_secrets,
                RedactingRenderer(renderer),
            ],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _AdslotHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's own configuration (its dictConfig, when it ran one) gives its loggers handlers of their own:
    # they propagate to the root's instead, so that their lines have the same shape.
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    # No access log (put one on the reverse proxy): uvicorn writes one line a request through its own cycle
    # whenever its access logger has a handler to reach, which the root's would otherwise be.
    logging.getLogger(ACCESS_LOGGER).propagate = False


def configure_from_environment() -> None:
    """configure_logging from ADSLOT_LOG_FORMAT and ADSLOT_LOG_LEVEL, for a process that has no Settings of
    its own yet (a worker before its app is built, a ledger writer process); settings `adslot serve`
    refused never get here, so a bad value falls back to the defaults rather than stop the process."""
    try:
        settings = load_settings()
    except SettingsError:
        settings = DEFAULTS
    configure_logging(settings.log_format, settings.log_level)
