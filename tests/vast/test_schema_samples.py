"""Sanity of the schema validator itself, on the IAB's published VAST 2.0 samples."""

from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema

from tests.vast.schema import SAMPLES_DIR, schema_errors

VALID_SAMPLES = [
    "VAST_1-2.0_Samples_Inline_LinearRegular_VAST2.0.xml",
    "VAST_1-2.0_Samples_Inline_NonLinear_VAST2.0.xml",
    "VAST_1-2.0_Samples_Tremor-Video-Samples_vast2RegularLinear.xml",
    "VAST_1-2.0_Samples_Tremor-Video-Samples_vast_inline_linear.xml",
    "VAST_1-2.0_Samples_Tremor-Video-Samples_vast_wrapper_linear_1.xml",
    "VAST_1-2.0_Samples_Tremor-Video-Samples_vast_wrapper_linear_2.xml",
]
OUT_OF_ORDER_SAMPLE = "VAST_1-2.0_Samples_Tremor-Video-Samples_vast2Nonlinear.xml"
"""Its InLine puts Creatives before Impression, which the schema's sequence forbids."""


def sample(name: str) -> Path:
    path = SAMPLES_DIR / name
    if not path.is_file():
        pytest.skip(f"VAST sample {name} is not in {SAMPLES_DIR}")
    return path


@pytest.mark.parametrize("name", VALID_SAMPLES)
def test_iab_sample_validates_with_the_schema_loader(vast_schema: xmlschema.XMLSchema, name: str) -> None:
    assert schema_errors(vast_schema, sample(name).read_text(encoding="utf-8")) == []


def test_schema_rejects_the_sample_whose_creatives_precede_its_impression(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    errors = schema_errors(vast_schema, sample(OUT_OF_ORDER_SAMPLE).read_text(encoding="utf-8"))
    assert errors
    assert any("'Creatives'" in error and "'Impression'" in error for error in errors), errors


def test_both_wrapper_and_inline_samples_are_covered() -> None:
    texts = [sample(name).read_text(encoding="utf-8") for name in VALID_SAMPLES]
    assert any("<Wrapper" in t for t in texts)
    assert any("<InLine" in t for t in texts)
