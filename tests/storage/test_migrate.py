"""Several nodes preparing one new PostgreSQL database at once take turns: every one starts, and the sandbox
is seeded once. (Several nodes share PostgreSQL only: SQLite serves one host.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import drop_schemas, free_port, make_settings

PREPARE = """
import os, sys, time
from adslot.environment import prepare_database
from adslot.settings import load_settings
open(sys.argv[1] + "." + str(os.getpid()), "w").close()  # ready
while not os.path.exists(sys.argv[1]):  # the go signal: they all start at once
    time.sleep(0.001)
for env in load_settings().environments:
    key = prepare_database(env)
print(key)
"""


@pytest.mark.postgres
def test_nodes_preparing_a_new_database_at_once_all_start_and_share_one_sandbox_key(tmp_path: Path) -> None:
    settings, schemas = make_settings(tmp_path, "postgres", free_port())
    production = settings.environment("production")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ADSLOT_")}
    environ |= {
        "ADSLOT_DATA_DIR": str(tmp_path),
        "ADSLOT_DATABASE_URL": production.database_url,
        "ADSLOT_DATABASE_SCHEMA": schemas[0],
        "ADSLOT_SANDBOX_DATABASE_SCHEMA": schemas[1],
    }
    go = tmp_path / "go"
    try:
        nodes = [
            subprocess.Popen(
                [sys.executable, "-c", PREPARE, str(go)],
                env=environ,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("go.*"))) < len(nodes) and time.monotonic() < deadline:
            time.sleep(0.01)  # until every process has imported adslot and waits
        go.touch()
        outputs = [node.communicate(timeout=120) for node in nodes]
        failed = [err[-800:] for node, (_, err) in zip(nodes, outputs, strict=True) if node.returncode]
        assert not failed, failed
        keys = {out.strip() for out, _ in outputs}
        assert len(keys) == 1 and keys.pop().startswith("ssp_test_"), "one sandbox, seeded once"
    finally:
        drop_schemas(schemas)
