"""The report names the code it measured: the commit, and whether the tree differed from it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import report


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real git repository with source and an earlier report, standing in for the project's."""
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "src.py").write_text("x = 1\n")
    (tmp_path / "bench" / "results" / "latest.md").write_text("old report\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    monkeypatch.setattr(report, "REPO", tmp_path)
    return tmp_path


def test_a_report_rewritten_by_an_earlier_run_does_not_make_the_tree_dirty(repo: Path) -> None:
    (repo / "bench" / "results" / "latest.md").write_text("a newer report\n")
    facts = report.machine_facts([], "wrk")
    assert facts.git_dirty is False and facts.git_diff_sha256 is None


def test_a_changed_source_file_makes_the_tree_dirty_with_a_digest_of_the_change(repo: Path) -> None:
    (repo / "src.py").write_text("x = 2\n")
    first = report.machine_facts([], "wrk")
    (repo / "bench" / "results" / "latest.md").write_text("a newer report\n")
    second = report.machine_facts([], "wrk")
    assert first.git_dirty is True and first.git_diff_sha256
    assert second.git_diff_sha256 == first.git_diff_sha256, "the report's own change is not in the digest"
