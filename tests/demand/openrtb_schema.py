"""The shared OpenRTB 2.6 JSON Schemas (draft 2020-12) as validators, resolved in a local registry.

Each schema's `$id` is `https://iabtechlab.com/openrtb/2.6/<File>.json` and its `$ref`s are relative
("Imp.json"), so registering every file under its own `$id` resolves them all; the registry has no
retriever, so a reference it does not hold fails instead of reaching the network. Tests skip, saying why,
when shared/openrtb is absent.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from referencing import Registry, Resource

from tests.conftest import SHARED

OPENRTB_DIR = SHARED / "openrtb" / "2.6"
SCHEMA_DIR = OPENRTB_DIR / "schema"
SAMPLES_DIR = OPENRTB_DIR / "samples"
EXAMPLES_DIR = SCHEMA_DIR / "examples"
BASE_ID = "https://iabtechlab.com/openrtb/2.6/"
MISSING = f"the OpenRTB 2.6 JSON Schemas are not at {SCHEMA_DIR} (shared/openrtb lives outside the repo)"


def require_shared() -> None:
    if not (SCHEMA_DIR / "BidRequest.json").is_file():
        pytest.skip(MISSING)


@cache
def _registry() -> Registry[Any]:
    schemas = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(SCHEMA_DIR.glob("*.json"))]
    return Registry().with_resources((schema["$id"], Resource.from_contents(schema)) for schema in schemas)


@cache
def validator(root: str) -> Any:
    """A Draft 2020-12 validator for one root object, e.g. "BidRequest" or "BidResponse"."""
    require_shared()
    return Draft202012Validator({"$ref": f"{BASE_ID}{root}.json"}, registry=_registry())


def schema_errors(root: str, document: Any) -> list[str]:
    """Every violation as 'path: message'; empty when the document validates."""
    return [
        f"{'/'.join(str(part) for part in error.absolute_path)}: {error.message}"
        for error in validator(root).iter_errors(document)
    ]


def load_json(path: Path) -> Any:
    if not path.is_file():
        pytest.skip(f"{path.name} is not in {path.parent} (shared/openrtb lives outside the repo)")
    return json.loads(path.read_text(encoding="utf-8"))
