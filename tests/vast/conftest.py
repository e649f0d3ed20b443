"""The IAB VAST 2.0.1 schema, loaded once; tests that need it skip, saying why, when it is absent."""

from __future__ import annotations

import pytest
import xmlschema

from tests.vast.schema import MISSING_SCHEMA, SCHEMA_PATH


@pytest.fixture(scope="session")
def vast_schema() -> xmlschema.XMLSchema:
    if not SCHEMA_PATH.is_file():
        pytest.skip(MISSING_SCHEMA)
    return xmlschema.XMLSchema(str(SCHEMA_PATH))
