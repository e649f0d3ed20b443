"""The code stays ruff- and mypy-clean: CI fails on a lint or type error like on a failing test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow("subprocess")  # ruff, mypy, mkdocs

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_finds_nothing() -> None:
    done = run("ruff", "check", "src", "tests", "bench")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_applied() -> None:
    done = run("ruff", "format", "--check", "src", "tests", "bench")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing() -> None:
    done = run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr
