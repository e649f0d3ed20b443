"""Fixtures of the contract suite: each environment's database, opened the way the server opens it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from adslot.storage.database import make_engine
from tests.conftest import LiveServer
from tests.contract.support import ENVIRONMENTS


@pytest.fixture(scope="module")
def dbs(live: LiveServer) -> Iterator[dict[str, sa.Engine]]:
    """One engine per environment (production, sandbox) on the live server's own databases."""
    engines = {name: make_engine(live.settings.environment(name)) for name in ENVIRONMENTS}
    yield engines
    for engine in engines.values():
        engine.dispose()


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """The shared `http` fixture, once per module: building an httpx.Client loads the CA bundle (~0.2 s)."""
    with httpx.Client(timeout=30) as client:
        yield client
