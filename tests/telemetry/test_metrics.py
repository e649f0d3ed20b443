"""{host}/metrics: exact counts after known traffic on either lane, the ledger's and catalog's figures, its
protection, and the sum of every worker's counts under `adslot serve --workers 2`."""

from __future__ import annotations

import json
import time
import timeit
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from adslot.demand.caller import PartnerCaller
from adslot.settings import SettingsError, load_settings
from adslot.telemetry import metrics
from adslot.telemetry.metrics import LATENCY_BOUNDS, AdRequestMeter, Meters, Tally
from adslot.vast.wrapper import build_wrapper
from tests.conftest import PROD_VENUE, LiveServer, drop_schemas, play_time, start_server
from tests.served import Server

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


def scrape(http: httpx.Client, base: str) -> Samples:
    answer = http.get(f"{base}/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return parse(answer.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def host(live: LiveServer) -> str:
    return f"http://127.0.0.1:{live.settings.port}"


def ad_request(http: httpx.Client, live: LiveServer, venue: str, key: str | None = None) -> httpx.Response:
    assert live.keys is not None
    return http.post(
        f"{live.url}/api/v1/ad/request",
        headers={"Ssp-Key": key or live.keys.production},
        json={"venue_id": venue, "play_time": play_time()},
    )


def test_ad_requests_and_fires_are_counted_exactly_by_outcome_and_result(
    live: LiveServer, http: httpx.Client
) -> None:
    before = scrape(http, host(live))
    uuids = []
    for _ in range(3):
        answer = ad_request(http, live, PROD_VENUE)
        assert answer.status_code == 200
        uuids.append(answer.json()["data"]["ad_request_uuid"])
    assert ad_request(http, live, "venue-empty").status_code == 204
    assert ad_request(http, live, PROD_VENUE, key="ssp_live_nonsense").status_code == 401
    impression = f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuids[0]}"
    assert http.get(impression).json()["data"]["result"] == "counted"
    assert http.get(impression).json()["data"]["result"] == "duplicate"
    assert http.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid=nope").status_code == 400
    start = f"{live.url}/api/v1/ad/tracking/video/?ad_request_uuid={uuids[1]}&event=start"
    assert http.get(start).json()["data"]["result"] == "counted"
    assert http.get(f"{live.url}/api/v1/ad/vast/{uuids[2]}").status_code == 200
    after = scrape(http, host(live))

    production = {"environment": "production"}
    assert grew(before, after, "adslot_ad_requests_total", **production, outcome="filled") == 3
    assert grew(before, after, "adslot_ad_requests_total", **production, outcome="no_fill") == 1
    assert grew(before, after, "adslot_ad_requests_total", **production, outcome="refused") == 1
    pops = {"environment": "production", "event": "impression"}
    assert grew(before, after, "adslot_pop_events_total", **pops, result="counted") == 1
    assert grew(before, after, "adslot_pop_events_total", **pops, result="duplicate") == 1
    assert grew(before, after, "adslot_pop_events_total", **pops, result="invalid") == 1
    start_pops = {"environment": "production", "event": "start", "result": "counted"}
    assert grew(before, after, "adslot_pop_events_total", **start_pops) == 1
    # One latency observation per answer, on the path it took, and none elsewhere.
    for path, answered in (("ad_request", 5), ("impression", 3), ("tracking", 1), ("vast", 1)):
        labels = {"environment": "production", "path": path}
        assert grew(before, after, "adslot_request_duration_seconds_count", **labels) == answered, path
        inf = {**labels, "le": "+Inf"}
        assert grew(before, after, "adslot_request_duration_seconds_bucket", **inf) == answered, path
        assert grew(before, after, "adslot_request_duration_seconds_sum", **labels) > 0, path
    sandbox = {"environment": "sandbox", "path": "ad_request"}
    assert grew(before, after, "adslot_request_duration_seconds_count", **sandbox) == 0


def test_requests_through_the_framework_lane_are_counted_once_as_well(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid = ad_request(http, live, PROD_VENUE).json()["data"]["ad_request_uuid"]
    before = scrape(http, host(live))
    # A percent-escaped URL is declined by the hot lane and served by Litestar (api/hot_routes.py).
    escaped = uuid.replace("-", "%2D")
    answer = http.get(f"{live.url}/api/v1/ad/tracking/video/?ad_request_uuid={escaped}&event=midpoint")
    assert answer.json()["data"]["result"] == "counted"
    assert http.get(f"{live.url}/api/v1/ad/vast/{escaped}").status_code == 200
    after = scrape(http, host(live))
    midpoint = {"environment": "production", "event": "midpoint", "result": "counted"}
    assert grew(before, after, "adslot_pop_events_total", **midpoint) == 1
    for path in ("tracking", "vast"):
        labels = {"environment": "production", "path": path}
        assert grew(before, after, "adslot_request_duration_seconds_count", **labels) == 1, path


def test_ledger_batches_queue_depth_and_catalog_version_are_exposed(
    live: LiveServer, http: httpx.Client
) -> None:
    before = scrape(http, host(live))
    for _ in range(4):
        assert ad_request(http, live, PROD_VENUE).status_code == 200
    after = scrape(http, host(live))
    env = {"environment": "production"}
    batches = grew(before, after, "adslot_ledger_batch_size_count", **env)
    assert 1 <= batches <= 4
    assert grew(before, after, "adslot_ledger_batch_size_sum", **env) >= 4  # every issue went in a batch
    assert grew(before, after, "adslot_ledger_commit_duration_seconds_count", **env) == batches
    assert grew(before, after, "adslot_ledger_commit_duration_seconds_sum", **env) > 0
    assert value(after, "adslot_ledger_queue_depth", **env) == 0  # nothing waits between requests
    assert live.app is not None
    for name, environment in live.app.environments.items():
        assert environment.catalog is not None
        version = value(after, "adslot_catalog_version", environment=name)
        assert version == environment.catalog.version > 0


def test_a_flushed_tally_matches_prometheus_clients_own_histogram() -> None:
    """The flush writes prometheus_client's bucket values directly: the same exposition as observe()."""
    values = [0.0001, 0.0005, 0.0007, 0.003, 0.2, 0.2, 7.0, 42.0]
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("h", "h", buckets=LATENCY_BOUNDS, registry=theirs)
    flushed = Histogram("h", "h", buckets=LATENCY_BOUNDS, registry=ours)
    tally = Tally(LATENCY_BOUNDS)
    for index, seconds in enumerate(values):
        reference.observe(seconds)
        tally.observe(seconds)
        if index % 3 == 0:
            tally.flush_into(flushed)  # several flushes add up, each only what is new
    tally.flush_into(flushed)
    tally.flush_into(flushed)
    mine, reference_samples = (parse(generate_latest(r).decode()) for r in (ours, theirs))
    assert {k: v for k, v in mine.items() if k[0] != "h_created"} == {
        k: v for k, v in reference_samples.items() if k[0] != "h_created"
    }


def test_a_second_demand_caller_of_one_environment_adds_its_counts_without_a_negative_increment() -> None:
    """Two apps in one process serving one environment name each count their partners from zero: the
    second's smaller counts are added to the first's, not subtracted (a Counter refuses that at flush)."""
    environment = "metrics-two-callers"
    labels = {"environment": environment, "partner": "dsp", "outcome": "bid"}
    first, second = PartnerCaller(), PartnerCaller()
    metrics.set_demand(environment, first, {"dsp": ({"bid": 5}, False)})
    metrics.flush()
    metrics.set_demand(environment, second, {"dsp": ({"bid": 2}, False)})
    metrics.flush()
    metrics.set_demand(environment, first, {"dsp": ({"bid": 6}, False)})
    metrics.flush()
    assert value(parse(metrics.render().decode()), "adslot_demand_requests_total", **labels) == 8


def test_an_unknown_event_label_is_folded_into_other() -> None:
    meters = Meters("production")
    for event in ("bogus", "also-bogus", "start"):
        meters.pop(event, "invalid")
    assert meters.pops["other", "invalid"] == 2
    assert meters.pops["start", "invalid"] == 1


def test_counting_an_answer_costs_under_a_tenth_of_building_the_answer_it_counts() -> None:
    """What the hot lane adds per request (perf_counter at message complete, done() at the answer, a pop's
    count), against the least an ad request's answer costs (its VAST wrapper), timed side by side: a ratio
    holds on a slow machine as on a fast one."""
    meter = AdRequestMeter()
    meters = Meters("production")
    runs = 200_000
    started = time.perf_counter()

    def each(work: Callable[[], object], number: int = runs) -> float:
        return min(timeit.repeat(work, number=number, repeat=5)) / number

    per_answer = each(lambda: meter.done(200, started))
    per_clock = each(time.perf_counter)
    per_pop = each(lambda: meters.pop("impression", "counted"))
    empty = each(lambda: None)  # the lambda's own call
    cost = per_answer + per_clock + per_pop - 2 * empty
    wrapper = each(
        lambda: build_wrapper(
            base_url="http://127.0.0.1:8000/production",
            ad_request_uuid="0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            venue_id=PROD_VENUE,
            screen_id=None,
            ad_system_name="adslot",
            ad_system_version="1.0",
        ),
        number=runs // 20,
    )
    print(f"counting {cost * 1e9:.0f} ns against a wrapper's {wrapper * 1e9:.0f} ns")
    assert cost < wrapper / 10, f"{cost * 1e9:.0f} ns to count, {wrapper * 1e9:.0f} ns to build the wrapper"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """An SQLite server whose metrics take a token and only 127.0.0.2 (loopback aliases a /8 on Linux),
    behind a trusted proxy at 127.0.0.3."""
    server, schemas = start_server(
        tmp_path_factory.mktemp("guarded"),
        "sqlite",
        ADSLOT_METRICS_TOKEN="s3cret-token-0123456789",
        ADSLOT_METRICS_ALLOW="127.0.0.2/32",
        ADSLOT_TRUSTED_PROXIES="127.0.0.3",
    )
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


def test_metrics_refuse_other_networks_with_403_and_missing_tokens_with_401(guarded: LiveServer) -> None:
    url = f"{host(guarded)}/metrics"
    token = {"Authorization": "Bearer s3cret-token-0123456789"}
    with httpx.Client(timeout=30) as loopback:
        refused = loopback.get(url, headers=token)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden_network"
    with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address="127.0.0.2")) as allowed:
        missing = allowed.get(url)
        wrong = allowed.get(url, headers={"Authorization": "Bearer s3cret-token-0123456780"})
        basic = allowed.get(url, headers={"Authorization": "Basic s3cret-token-0123456789"})
        ok = allowed.get(url, headers=token)
        posted = allowed.post(url, headers=token)
    assert missing.status_code == wrong.status_code == basic.status_code == 401
    assert missing.json() == {
        "status": 401,
        "error": {
            "code": "missing_token",
            "message": "send Authorization: Bearer <ADSLOT_METRICS_TOKEN>",
            "field": "Authorization",
        },
    }
    assert wrong.json()["error"]["code"] == "invalid_token"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert ok.status_code == 200 and "adslot_ad_requests_total" in ok.text
    assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
    # Neither health endpoint is guarded: load balancers probe them from anywhere.
    with httpx.Client(timeout=30) as loopback:
        assert loopback.get(f"{host(guarded)}/healthz").status_code == 200


def test_metrics_take_the_client_from_x_forwarded_for_only_behind_a_trusted_proxy(
    guarded: LiveServer,
) -> None:
    """The address check follows ADSLOT_TRUSTED_PROXIES, as the rest of adslot does (not uvicorn's
    FORWARDED_ALLOW_IPS, which trusts any 127.0.0.1 peer's header): a header from another peer names no
    one, and its request, forwarded by a proxy adslot does not know, is refused whatever its peer."""
    url = f"{host(guarded)}/metrics"
    token = {"Authorization": "Bearer s3cret-token-0123456789"}

    def status(local: str, forwarded: str | None) -> int:
        headers = token if forwarded is None else {**token, "X-Forwarded-For": forwarded}
        transport = httpx.HTTPTransport(local_address=local)
        with httpx.Client(timeout=30, transport=transport) as client:
            return client.get(url, headers=headers).status_code

    assert status("127.0.0.1", "127.0.0.2") == 403  # uvicorn would let this peer name the allowed address
    assert status("127.0.0.2", "127.0.0.2") == 403  # an allowed peer, forwarding for an unknown proxy
    assert status("127.0.0.3", "10.1.1.1, 127.0.0.2") == 200  # the trusted proxy's client: allowed
    assert status("127.0.0.3", "127.0.0.2, 10.1.1.1") == 403  # the client it names is 10.1.1.1
    assert status("127.0.0.3", None) == 403  # the proxy itself is not an allowed client
    assert status("127.0.0.2", None) == 200


def test_metrics_settings_are_validated() -> None:
    assert load_settings({}).metrics_allow == ("127.0.0.0/8", "::1/128")
    assert load_settings({}).metrics_token is None
    assert load_settings({"ADSLOT_METRICS_ALLOW": "10.0.0.0/8, 192.168.1.7"}).metrics_allow == (
        "10.0.0.0/8",
        "192.168.1.7/32",
    )
    with pytest.raises(SettingsError, match="ADSLOT_METRICS_ALLOW"):
        load_settings({"ADSLOT_METRICS_ALLOW": "10.0.0.0/33"})
    for bad in ("short", "has a space in it here", "é" * 20):
        with pytest.raises(SettingsError, match="ADSLOT_METRICS_TOKEN"):
            load_settings({"ADSLOT_METRICS_TOKEN": bad})


def test_metrics_under_two_workers_add_up_every_workers_counts(served: tuple[Server, str, object]) -> None:
    server, key, _ = served
    server.start(workers=2)
    try:
        pids = set()
        for _ in range(30):  # a new connection each time spreads them over both workers
            answer = httpx.post(
                f"{server.url}/api/v1/ad/request",
                headers={"Ssp-Key": key, "Connection": "close"},
                json={"venue_id": "lobby", "play_time": int(time.time()) + 30},
            )
            assert answer.status_code == 200
            pids.add(httpx.get(f"{server.url}/healthz", headers={"Connection": "close"}).json()["worker_pid"])
        assert len(pids) == 2, "both workers served"
        directory = Path(server.environ["ADSLOT_DATA_DIR"]).resolve() / "metrics" / str(server.port)
        assert list(directory.glob("*.db")), "the workers write their values there"
        filled: float = -1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the other worker flushes within a second
            samples = parse(httpx.get(f"{server.url}/metrics").text)
            filled = value(samples, "adslot_ad_requests_total", environment="production", outcome="filled")
            if filled == 30:
                break
            time.sleep(0.2)
        assert filled == 30
        durations = value(
            samples, "adslot_request_duration_seconds_count", environment="production", path="ad_request"
        )
        assert durations == 30
        answer = httpx.get(f"{server.url}/readyz")
        assert answer.status_code == 200, answer.text
        assert json.loads(answer.text)["status"] == "ok"
    finally:
        server.terminate()
