"""Prometheus metrics: tallied in plain Python on the hot paths, flushed into prometheus_client once a second.

prometheus_client's `inc`/`observe` take a lock and, under `adslot serve --workers N` (multiprocess mode),
write to an mmap file: 1-3 µs each, several times a pixel's own budget. So a hot path only adds one to a
list slot or a dict entry of this process's tallies (a histogram is its bucket counts, found by bisect on
precomputed bounds), and `flush()` moves what changed since the last flush into the prometheus_client
metrics: once a second from the worker's loop (ops/app.py), at shutdown, and right before /metrics renders.
A scrape therefore sees the other workers' counts up to a second late, and its own exactly.

Under several workers `adslot serve` sets PROMETHEUS_MULTIPROC_DIR before they start (`prepare_multiprocess`)
and /metrics renders every worker's files with MultiProcessCollector; one process renders its own registry.

Everything here is process state, shared by every app in the process (the tests run several in one).
"""

from __future__ import annotations

import os
import shutil
import threading
import weakref
from bisect import bisect_left
from pathlib import Path
from time import perf_counter
from typing import Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client import multiprocess as prometheus_multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
MULTIPROCESS = values.ValueClass is not values.MutexValue
"""Whether prometheus_client writes this process's values to PROMETHEUS_MULTIPROC_DIR (it decides once, when
it is first imported)."""

LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds (seconds) of adslot_request_duration_seconds and adslot_ledger_commit_duration_seconds."""
BATCH_BOUNDS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0)
"""Upper bounds (operations) of adslot_ledger_batch_size."""
OUTCOMES = ("filled", "no_fill", "refused")
PATHS = ("ad_request", "vast", "impression", "tracking")
EVENTS = ("impression", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete")
POP_RESULTS = ("counted", "duplicate", "late", "echo", "invalid", "unknown", "released", "limited")
"""The results a pixel fire gets: the ledger's verdict (counted, duplicate, echo, late, unknown, released,
invalid when the invalid-traffic rules flagged it), invalid too when it was refused before the ledger (a
malformed uuid, an unknown event or layer), limited when ADSLOT_RATE_LIMIT_PIXELS turned it away."""
OTHER = "other"
"""The label of an event (or result) outside the known ones, so that no input can grow the series."""
MAX_POP_SERIES = 256

REGISTRY = CollectorRegistry(auto_describe=True)
"""adslot's metrics (one process); under several workers /metrics renders the multiprocess files instead."""
AD_REQUESTS = Counter(
    "adslot_ad_requests",
    "Ad requests answered, by outcome: filled (200), no_fill (204), refused (any 4xx or 5xx).",
    ["environment", "outcome"],
    registry=REGISTRY,
)
POP_EVENTS = Counter(
    "adslot_pop_events",
    "Proof-of-Play fires answered, by event and result.",
    ["environment", "event", "result"],
    registry=REGISTRY,
)
REQUEST_DURATION = Histogram(
    "adslot_request_duration_seconds",
    "Time from a hot request's last byte read to its answer written, by path.",
    ["environment", "path"],
    buckets=LATENCY_BOUNDS,
    registry=REGISTRY,
)
BATCH_SIZE = Histogram(
    "adslot_ledger_batch_size",
    "Operations per ledger write batch.",
    ["environment"],
    buckets=BATCH_BOUNDS,
    registry=REGISTRY,
)
COMMIT_DURATION = Histogram(
    "adslot_ledger_commit_duration_seconds",
    "A ledger write batch's round trip as the worker sees it: handed over until its commit is answered.",
    ["environment"],
    buckets=LATENCY_BOUNDS,
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "adslot_ledger_queue_depth",
    "Ledger operations waiting for the next batch (summed over live workers).",
    ["environment"],
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
CATALOG_VERSION = Gauge(
    "adslot_catalog_version",
    "The catalog version in use (the lowest of the live workers': every one has reached it).",
    ["environment"],
    multiprocess_mode="livemin",
    registry=REGISTRY,
)
SCREENS = Gauge(
    "adslot_screens",
    "Screens by status (online, silent, closed, never_seen; unregistered counts those asking unregistered), "
    "as the last fleet look found them.",
    ["environment", "status"],
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
DEMAND_OUTCOMES = (
    "bid",
    "no_bid",
    "dropped",
    "timeout",
    "error",
    "skipped_qps",
    "skipped_breaker",
)
DEMAND_REQUESTS = Counter(
    "adslot_demand_requests",
    "Demand partners considered for a slot, by partner and outcome (skipped ones were not asked).",
    ["environment", "partner", "outcome"],
    registry=REGISTRY,
)
DEMAND_BREAKER = Gauge(
    "adslot_demand_breaker_open",
    "1 while a partner's circuit breaker is open or half open (in any live worker), else 0.",
    ["environment", "partner"],
    multiprocess_mode="livemax",
    registry=REGISTRY,
)


class _Answer(Protocol):
    status: int


R = TypeVar("R", bound=_Answer)


class Tally:
    """A histogram as plain bucket counts and a sum: observe() is a bisect and two additions."""

    __slots__ = ("_flushed", "_flushed_sum", "bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = list(bounds)
        self.counts = [0] * (len(bounds) + 1)
        """counts[i]: values <= bounds[i] and > bounds[i-1]; the last: above every bound (+Inf)."""
        self.sum = 0.0
        self._flushed = [0] * (len(bounds) + 1)
        self._flushed_sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def flush_into(self, child: Histogram) -> None:
        """Add what was observed since the last flush to a prometheus_client histogram's buckets and sum.

        Histogram.observe adds one value; a flush adds many, so it adds to the child's per-bucket values
        (`_buckets`, not cumulative, and `_sum`) directly: prometheus_client's own layout since 0.4,
        checked by tests/telemetry/test_metrics.py."""
        counts, flushed = self.counts, self._flushed
        for i, done in enumerate(flushed):
            now = counts[i]
            if now != done:
                child._buckets[i].inc(now - done)
                flushed[i] = now
        total = self.sum
        if total != self._flushed_sum:
            child._sum.inc(total - self._flushed_sum)
            self._flushed_sum = total


class PathMeter(Tally):
    """A hot path's latency: `done(status, started)` once its answer is written."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(LATENCY_BOUNDS)

    def done(self, status: int, started: float) -> None:
        seconds = perf_counter() - started
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def answered(self, started: float, reply: R) -> R:
        """done() with the reply's status, and the reply: for the framework's handlers (api/hot_routes.py)."""
        self.done(reply.status, started)
        return reply


class AdRequestMeter(PathMeter):
    """The ad request's latency and outcome, read from the answer's status, so that a refusal made anywhere
    on its path (a bad body, a bad key, a rate limit, an outage) counts as refused."""

    __slots__ = ("_flushed_outcomes", "outcomes")

    def __init__(self) -> None:
        super().__init__()
        self.outcomes = [0, 0, 0]
        """filled, no_fill, refused (OUTCOMES)."""
        self._flushed_outcomes = [0, 0, 0]

    def done(self, status: int, started: float) -> None:
        seconds = perf_counter() - started
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds
        if status == 200:
            self.outcomes[0] += 1
        elif status == 204:
            self.outcomes[1] += 1
        elif status >= 400:
            self.outcomes[2] += 1


NO_METER = PathMeter()
"""What a request without a metered path is told of (counted nowhere): saves a check on the hot path."""


class Meters:
    """One environment's tallies in this process."""

    __slots__ = ("ad_request", "batches", "commits", "environment", "impression", "pops", "tracking", "vast")

    def __init__(self, environment: str) -> None:
        self.environment = environment
        self.ad_request = AdRequestMeter()
        self.vast = PathMeter()
        self.impression = PathMeter()
        self.tracking = PathMeter()
        self.batches = Tally(BATCH_BOUNDS)
        self.commits = Tally(LATENCY_BOUNDS)
        self.pops: dict[tuple[str, str], int] = {(e, r): 0 for e in EVENTS for r in POP_RESULTS}
        """Fires by (event, result), every known pair present: a hot fire is one dict update, no check."""

    def pop(self, event: str, result: str) -> None:
        """One pixel fire answered with `result`."""
        key = (event, result)
        try:
            self.pops[key] += 1
        except KeyError:
            self._new_pop(key)

    def _new_pop(self, key: tuple[str, str]) -> None:
        event, result = key
        if event not in EVENTS:
            event = OTHER
        if (event, result) not in self.pops and len(self.pops) >= MAX_POP_SERIES:
            result = OTHER
        self.pops[event, result] = self.pops.get((event, result), 0) + 1

    def batch(self, size: int, seconds: float) -> None:
        """One ledger write batch of `size` operations, answered `seconds` after it was handed over."""
        self.batches.observe(size)
        self.commits.observe(seconds)

    def path(self, name: str) -> PathMeter:
        meter: PathMeter = getattr(self, name)
        return meter


_meters: dict[str, Meters] = {}
_flushed_pops: dict[tuple[str, str, str], int] = {}
_gauges: dict[str, tuple[int, int]] = {}
"""Per environment: (queue depth, catalog version), as last sampled (ops/app.py)."""
DemandCounts = dict[str, tuple[dict[str, int], bool]]
"""Per partner: (outcome counts since its source was made, breaker not closed)."""
_demand: weakref.WeakKeyDictionary[object, tuple[str, DemandCounts]] = weakref.WeakKeyDictionary()
"""Per source (an environment's demand caller): its environment and its counts as last sampled (ops/app.py).
Each source counts from zero, and several may share an environment's name (every app of a process that
serves it: the tests run several), so what was flushed is remembered per source, never per name: a new
source's smaller counts would otherwise make a negative increment, which a Counter refuses."""
_flushed_demand: weakref.WeakKeyDictionary[object, dict[tuple[str, str], int]] = weakref.WeakKeyDictionary()
_flush_lock = threading.Lock()


def meters_for(environment: str) -> Meters:
    """`environment`'s tallies in this process (made at first use; look them up once, not per request)."""
    meters = _meters.get(environment)
    if meters is None:
        meters = _meters.setdefault(environment, Meters(environment))
    return meters


def count_pop(environment: str, event: str, result: str) -> None:
    """Count one Proof-of-Play fire's answer (adslot_pop_events_total): a plain in-process addition, cheap
    enough for a hot path or a batch of 1,000 fires. Results beyond POP_RESULTS (say, a batch's own) get a
    series of their own; an event outside EVENTS is counted as `other`."""
    meters_for(environment).pop(event, result)


def set_gauges(environment: str, queue_depth: int, catalog_version: int) -> None:
    """Sample the ledger's queue depth and the catalog version, published at the next flush."""
    _gauges[environment] = (queue_depth, catalog_version)


def set_demand(environment: str, source: object, partners: DemandCounts) -> None:
    """Sample each demand partner's outcome counts and breaker as `source` (the caller that counts them)
    sees them, published at the next flush."""
    with _flush_lock:
        _demand[source] = (environment, partners)


_screens: dict[str, dict[str, int]] = {}


def set_screens(environment: str, by_status: dict[str, int]) -> None:
    """The fleet watch's counts (fleet/watch.py), set into the gauges at the next flush."""
    _screens[environment] = dict(by_status)


def flush() -> None:
    """Move every tally's change since the last flush into the prometheus_client metrics."""
    with _flush_lock:
        for name, meters in list(_meters.items()):
            ad = meters.ad_request
            for i, outcome in enumerate(OUTCOMES):
                delta = ad.outcomes[i] - ad._flushed_outcomes[i]
                child = AD_REQUESTS.labels(name, outcome)  # made even at zero, so rate() starts at once
                if delta:
                    child.inc(delta)
                    ad._flushed_outcomes[i] += delta
            for path in PATHS:
                meters.path(path).flush_into(REQUEST_DURATION.labels(name, path))
            meters.batches.flush_into(BATCH_SIZE.labels(name))
            meters.commits.flush_into(COMMIT_DURATION.labels(name))
            for (event, result), count in list(meters.pops.items()):
                key = (name, event, result)
                delta = count - _flushed_pops.get(key, 0)
                if delta:
                    POP_EVENTS.labels(name, event, result).inc(delta)
                    _flushed_pops[key] = count
        for name, by_status in list(_screens.items()):
            for status, count in by_status.items():
                SCREENS.labels(name, status).set(count)
        for name, (depth, version) in _gauges.items():
            QUEUE_DEPTH.labels(name).set(depth)
            CATALOG_VERSION.labels(name).set(version)
        for source, (name, partners) in list(_demand.items()):
            flushed = _flushed_demand.setdefault(source, {})
            for partner, (counts, tripped) in partners.items():
                DEMAND_BREAKER.labels(name, partner).set(1 if tripped else 0)
                for outcome, count in counts.items():
                    delta = count - flushed.get((partner, outcome), 0)
                    if delta:
                        DEMAND_REQUESTS.labels(name, partner, outcome).inc(delta)
                        flushed[partner, outcome] = count


def render() -> bytes:
    """The Prometheus text exposition of every worker (multiprocess) or of this process; flush() first."""
    if MULTIPROCESS:
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def prepare_multiprocess(directory: Path) -> None:
    """For `adslot serve --workers N`, before its workers start: an empty PROMETHEUS_MULTIPROC_DIR (files of
    an earlier run would be added to this one's counts), named in the environment the workers inherit."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    os.environ[MULTIPROC_ENV] = str(directory)


def worker_gone(pid: int) -> None:
    """A worker exited: drop its live gauges (its counters stay in the totals, as Prometheus expects)."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        prometheus_multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
