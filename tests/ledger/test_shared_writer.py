"""One listening ledger writer for several workers' stores: verdicts routed back, batches merged, restarts."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adslot.ledger.backends import database_store, ledger_for
from adslot.ledger.process_store import ProcessLedgerStore
from adslot.ledger.records import Fire, Issue, NoFill, Verdict
from adslot.ledger.shared_writer import SharedWriter, socket_path
from adslot.ledger.wire import WireError, read_frame, write_frame
from tests.ledger.conftest import migrated
from tests.ledger.stores import PLAY, LedgerDatabase, check_accounting, record, workload


@pytest.fixture(scope="module")
def ledger_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerDatabase]:
    """SQLite's: a writer process serves SQLite's ledger only (PostgreSQL's is written from the workers)."""
    yield from migrated("sqlite", tmp_path_factory)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """Short, so the socket's path stays under the 108 bytes a Unix socket address may have."""
    path = Path(tempfile.mkdtemp(prefix="adslot-t-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def shared(db: LedgerDatabase, socket_dir: Path) -> Iterator[SharedWriter]:
    writer = SharedWriter(db.env, socket_path(socket_dir, db.env.name))
    writer.start()
    yield writer
    writer.stop()


def stores(db: LedgerDatabase, socket_dir: Path, count: int) -> list[ProcessLedgerStore]:
    made = [ledger_for(db.env, socket_dir) for _ in range(count)]
    assert all(isinstance(store, ProcessLedgerStore) for store in made)
    return made  # type: ignore[return-value]


def outcomes(verdicts: list[Verdict]) -> list[str]:
    return [v.outcome for v in verdicts]


def test_two_workers_batches_go_through_one_writer_process_and_each_gets_its_own_verdicts(
    db: LedgerDatabase, socket_dir: Path, shared: SharedWriter
) -> None:
    first, second = record(), record()

    async def scenario() -> list[list[str]]:
        one, two = stores(db, socket_dir, 2)
        await one.start()
        await two.start()
        try:
            assert one.process() is None and two.process() is None, "a shared writer's clients start none"
            issued = await asyncio.gather(one.apply([Issue(first)]), two.apply([Issue(second)]))
            fired = await asyncio.gather(
                one.apply([Fire(second.id, "impression", "wrapper", PLAY + 1)]),
                two.apply(
                    [
                        Fire(second.id, "impression", "wrapper", PLAY + 2),
                        Fire(first.id, "start", "wrapper", PLAY + 3),
                    ]
                ),
            )
            return [outcomes(v) for v in (*issued, *fired)]
        finally:
            await one.close()
            await two.close()

    answers = asyncio.run(scenario())
    assert answers[:2] == [["issued"], ["issued"]]
    # The same impression from both workers: counted once, whichever came first; the other is a duplicate.
    assert sorted([answers[2][0], answers[3][0]]) == ["counted", "duplicate"]
    assert answers[3][1] == "counted"
    rows = db.rows()
    assert rows[second.id]["impression_at"] is not None and rows[second.id]["duplicate_count"] == 1
    assert rows[first.id]["start_at"] == PLAY + 3
    assert shared.starts == 1


def test_concurrent_workers_through_one_shared_writer_never_pass_a_cap(
    db: LedgerDatabase, socket_dir: Path, shared: SharedWriter
) -> None:
    seen = asyncio.run(
        workload(
            db.env, seed=7, workers=3, tasks=3, operations=60, writer_process=True, socket_dir=socket_dir
        )
    )
    assert seen["issued"] > 0 and seen["impression counted"] > 0
    assert check_accounting(db) > 0


def test_batches_that_arrive_together_share_a_commit_and_a_bad_one_fails_alone(
    db: LedgerDatabase, socket_dir: Path, shared: SharedWriter
) -> None:
    stored, good, bad_twin = record(), record(), record()

    async def scenario() -> tuple[list[str], BaseException | list[Verdict]]:
        one, two = stores(db, socket_dir, 2)
        await one.start()
        await two.start()
        try:
            assert outcomes(await one.apply([Issue(stored)])) == ["issued"]
            assert shared.process is not None
            os.kill(shared.process.pid, signal.SIGSTOP)  # both frames wait in the writer's socket buffers
            try:
                pending_good = asyncio.ensure_future(one.apply([Issue(good)]))
                # Issuing an id that is already stored breaks the transaction (its primary key).
                pending_bad = asyncio.ensure_future(two.apply([Issue(stored), Issue(bad_twin)]))
                await asyncio.sleep(0.3)
            finally:
                os.kill(shared.process.pid, signal.SIGCONT)
            good_answer = await asyncio.wait_for(pending_good, 30)
            bad_answer = await asyncio.wait_for(asyncio.gather(pending_bad, return_exceptions=True), 30)
            return outcomes(good_answer), bad_answer[0]
        finally:
            await one.close()
            await two.close()

    good_outcomes, bad = asyncio.run(scenario())
    assert good_outcomes == ["issued"], "a neighbour's failed batch must not fail this one"
    assert isinstance(bad, WireError), bad
    rows = db.rows()
    assert good.id in rows and bad_twin.id not in rows, "the failed batch is rolled back whole"


def test_a_killed_shared_writer_is_started_again_and_its_workers_resend_it_their_batches_in_flight(
    db: LedgerDatabase, socket_dir: Path, shared: SharedWriter
) -> None:
    first, held, third = record(), record(), record()

    async def scenario() -> None:
        (store,) = stores(db, socket_dir, 1)
        await store.start()
        try:
            assert outcomes(await store.apply([Issue(first)])) == ["issued"]
            assert shared.process is not None
            old = shared.process
            os.kill(old.pid, signal.SIGSTOP)
            in_flight = asyncio.ensure_future(store.apply([Issue(held)]))
            await asyncio.sleep(0.2)
            assert not in_flight.done()
            os.kill(old.pid, signal.SIGKILL)
            # The killed writer never committed it: the new one, asked, applies it.
            assert outcomes(await asyncio.wait_for(in_flight, 60)) == ["issued"]
            assert outcomes(await asyncio.wait_for(store.apply([Issue(third)]), 60)) == ["issued"]
            assert shared.process is not old and shared.starts == 2
        finally:
            await store.close()

    asyncio.run(scenario())
    assert set(db.rows()) == {first.id, held.id, third.id}
    assert sum(fills for _, fills in db.stats().values()) == 3, "each issue counted once"


def test_stop_serves_connected_workers_to_the_end_then_the_writer_exits_cleanly(
    db: LedgerDatabase, socket_dir: Path
) -> None:
    shared = SharedWriter(db.env, socket_path(socket_dir, db.env.name))
    shared.start()
    late = record()
    codes: list[int | None] = []

    async def scenario() -> None:
        (store,) = stores(db, socket_dir, 1)
        await store.start()
        stopping = threading.Thread(target=lambda: codes.append(shared.stop()))
        stopping.start()
        await asyncio.sleep(0.3)
        assert not codes, "the writer must wait for the worker that is still connected"
        assert outcomes(await store.apply([Issue(late)])) == ["issued"]
        await store.close()
        await asyncio.get_running_loop().run_in_executor(None, stopping.join, 30)

    asyncio.run(scenario())
    assert codes == [0]
    assert late.id in db.rows()
    assert not socket_path(socket_dir, db.env.name).exists()


def test_a_worker_that_names_another_database_is_refused(
    db: LedgerDatabase, socket_dir: Path, shared: SharedWriter
) -> None:
    async def scenario() -> None:
        reads = database_store(db.env.database_url, db.env.database_schema, writes=False)
        other = ProcessLedgerStore(
            reads, db.env.database_url, "another_schema", socket_path(socket_dir, db.env.name)
        )
        with pytest.raises(RuntimeError, match="instead of ready"):
            await other.start()
        await reads.close()

    asyncio.run(scenario())


def test_a_worker_gives_up_at_once_when_the_shared_writers_directory_is_gone(
    db: LedgerDatabase, socket_dir: Path
) -> None:
    gone = socket_dir / "removed"

    async def scenario() -> float:
        (store,) = stores(db, gone, 1)
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="are gone"):
            await store.start()
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 5, "no writer will come back to a directory that is gone"


class AnswerCutter:
    """Between a worker's store and the shared writer: passes every byte to the writer and every answer back,
    except that, asked to, it drops the writer's next answer and cuts the connection, as a writer that died
    right after its commit would leave it. A fault on the wire, in front of the real writer."""

    def __init__(self, path: Path, writer: Path) -> None:
        self.path = path
        self.writer = writer
        self.cut_next = False
        self.connections = 0
        self.cut = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_unix_connection(str(self.writer))

        async def upstream() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        sending = asyncio.get_running_loop().create_task(upstream())
        try:
            while True:
                frame = await read_frame(up_reader)
                if self.cut_next:
                    self.cut_next = False
                    self.cut += 1
                    return
                write_frame(writer, frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            sending.cancel()
            writer.close()
            up_writer.close()


def test_a_batch_whose_answer_was_lost_after_its_commit_gets_that_answer_and_counts_once(
    db: LedgerDatabase, socket_dir: Path, shared: SharedWriter
) -> None:
    issued = record()

    async def scenario() -> None:
        cutter = AnswerCutter(socket_dir / "cut.sock", socket_path(socket_dir, db.env.name))
        await cutter.start()
        url, schema = db.env.database_url, db.env.database_schema
        store = ProcessLedgerStore(database_store(url, schema, writes=False), url, schema, cutter.path)
        await store.start()
        try:
            assert outcomes(await store.apply([Issue(issued)])) == ["issued"]
            cutter.cut_next = True
            fired = store.apply(
                [Fire(issued.id, "impression", "wrapper", PLAY + 1), NoFill("lobby", "s2", PLAY)]
            )
            # Committed by the writer, its answer lost: sent again, it is answered as it was committed.
            assert outcomes(await asyncio.wait_for(fired, 60)) == ["counted", "recorded"]
            assert (cutter.connections, cutter.cut) == (2, 1)
        finally:
            await store.close()
            cutter.close()

    asyncio.run(scenario())
    row = db.rows()[issued.id]
    assert (row["impression_at"], row["duplicate_count"]) == (PLAY + 1, 0)
    assert sorted(db.stats().values()) == [(1, 0), (1, 1)], "the issue and the no-fill counted once each"
    assert shared.starts == 1
