"""Made-up wrk runs and report configs for the report's table tests."""

from __future__ import annotations

from bench.report import Config
from bench.wrk import WrkResult


def wrk_run(rps: float, cpu_us: dict[str, float] | None = None, non2xx: int = 0) -> WrkResult:
    """A 5-second run at `rps` with fixed latencies."""
    return WrkResult(
        requests=int(rps * 5),
        duration_s=5.0,
        rps=rps,
        bytes=0,
        p50_us=1000,
        p90_us=1500,
        p99_us=3000,
        p999_us=4000,
        max_us=5000,
        mean_us=1100.0,
        non2xx=non2xx,
        socket_errors={},
        cpu_busy=0.9,
        cpu_us=cpu_us or {},
    )


def config(connections: list[int] | None = None) -> Config:
    """One impression scenario's config, at `connections` (64 alone by default)."""
    return Config(
        duration_s=5,
        warmup_s=1,
        connections=connections or [64],
        threads=2,
        rounds=1,
        workers=1,
        uuids=100,
        scenarios=["impression"],
        half_load=False,
        postgres_url=None,
        adslot_env={},
        tally=False,
    )
