"""The documentation: the MkDocs site builds strictly with every page, and the README stays a short front door
whose first two commands are the ones CI runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow("subprocess")  # ruff, mypy, mkdocs

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("index", "api", "decisioning", "console", "player", "operations", "architecture", "benchmark")
INSTALL_AND_RUN = (
    "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.lock -e . && .venv/bin/adslot serve"
)
INSTALL_AND_TEST = (
    "python3 -m venv .venv && .venv/bin/pip install -q -r requirements-dev.lock -e . "
    "&& .venv/bin/python -m pytest"
)
README_MAX_LINES = 300


def test_the_documentation_site_builds_strictly_with_every_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for page in PAGES:
        built = site / "index.html" if page == "index" else site / page / "index.html"
        assert built.is_file(), f"{page} was not built"


def test_the_readme_is_short_and_opens_with_the_two_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    blocks = re.findall(r"^```sh\n(.*?)\n```$", readme, flags=re.DOTALL | re.MULTILINE)
    assert blocks[:2] == [INSTALL_AND_RUN, INSTALL_AND_TEST]
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line]
    assert ci_lines[-1].endswith(INSTALL_AND_TEST)
