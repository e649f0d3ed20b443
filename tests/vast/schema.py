"""Where the shared IAB VAST 2.0.1 schema and samples live, and how tests read validation errors."""

from __future__ import annotations

from pathlib import Path

import xmlschema

VAST_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "vast"
SCHEMA_PATH = VAST_DIR / "vast_2.0.1.xsd"
SAMPLES_DIR = VAST_DIR / "samples"
MISSING_SCHEMA = f"the IAB VAST 2.0.1 schema is not at {SCHEMA_PATH} (shared/vast lives outside the repo)"


def schema_errors(schema: xmlschema.XMLSchema, document: str) -> list[str]:
    """Every validation error of a document, as 'path: reason' lines; empty when it validates."""
    return [f"{error.path}: {error.reason}" for error in schema.iter_errors(document)]
