"""Bodies nesting arrays or objects 1,000 or 100,000 deep (in a field the schema ignores, or as the whole
body) are a 400 `nesting_too_deep` on `body` on every endpoint that reads JSON, in both environments and on
both backends, and store nothing: the ad request, batch Proof of Play and the management API."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from adslot.api.json_body import decode_json
from adslot.errors import ApiError
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests
from tests.conftest import LiveServer, drop_schemas, start_server
from tests.contract.support import ENVIRONMENTS, assert_error, base_of, issue, key_of, record_of, venue_of

DEPTHS = (1_000, 100_000)
KINDS = ("array", "object")
BATCH = "/api/v1/ad/pop/batch"


def nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@pytest.fixture(scope="module")
def live(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Ad request bodies up to 1 MiB (an operator's ADSLOT_MAX_BODY_BYTES), so 100,000 levels (200 KB) reach
    the decoder rather than the size limit's 413."""
    server, schemas = start_server(
        tmp_path_factory.mktemp("adslot"), backend, ADSLOT_MAX_BODY_BYTES=str(1 << 20)
    )
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


def admin_of(live: LiveServer, env: str) -> str:
    assert live.keys
    return live.keys.production_admin if env == "production" else live.keys.sandbox_admin


def stored_ad_requests(live: LiveServer, env: str) -> int:
    engine = make_engine(live.settings.environment(env))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(ad_requests)).scalar_one())
    finally:
        engine.dispose()


def post(http: httpx.Client, url: str, key: str, body: bytes) -> httpx.Response:
    return http.post(url, content=body, headers={"Ssp-Key": key, "Content-Type": "application/json"})


def assert_too_deep(answer: httpx.Response) -> None:
    assert_error(answer, 400, "nesting_too_deep", "body")


@pytest.mark.parametrize("env", ENVIRONMENTS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_a_deep_ad_request_is_a_400_and_stores_nothing(
    live: LiveServer, http: httpx.Client, env: str, kind: str, depth: int
) -> None:
    url = f"{base_of(live, env)}/api/v1/ad/request"
    deep = nested(depth, kind)
    ignored = b'{"venue_id": "%s", "play_time": %d, "extra": %s}' % (
        venue_of(env).encode(),
        int(time.time()) + 120,
        deep,
    )
    before = stored_ad_requests(live, env)
    for body in (deep, ignored):
        assert_too_deep(post(http, url, key_of(live, env), body))
        assert_too_deep(post(http, url + "?format=xml", key_of(live, env), body))
    assert stored_ad_requests(live, env) == before


@pytest.mark.parametrize("env", ENVIRONMENTS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_a_deep_batch_of_proof_of_play_is_a_400_and_counts_nothing(
    live: LiveServer, http: httpx.Client, env: str, kind: str, depth: int
) -> None:
    ident = issue(http, live, env, play_time=int(time.time()))["ad_request_uuid"]
    fire = b'{"ad_request_uuid": "%s", "event": "impression", "played_at": %d, "extra": %s}' % (
        ident.encode(),
        int(time.time()),
        nested(depth, kind),
    )
    url = f"{base_of(live, env)}{BATCH}"
    for body in (nested(depth, kind), b'{"fires": [%s]}' % fire):
        assert_too_deep(post(http, url, key_of(live, env), body))
    assert record_of(http, live, ident, env)["events"]["impression"] is None


MANAGEMENT = (
    ("POST", "/api/v1/advertisers", b'{"name": %s}', "name"),
    ("POST", "/api/v1/campaigns", b'{"advertiser_id": 1, "name": "Deep", "venue_ids": %s}', "venue_ids[]"),
    ("PATCH", "/api/v1/campaigns/1", b'{"name": %s}', "name"),
    ("POST", "/api/v1/venues", b'{"venue_id": "deep", "name": "Deep", "tags": %s}', "tags[]"),
    ("PATCH", "/api/v1/venues/venue-1", b'{"name": %s}', "name"),
    (
        "POST",
        "/api/v1/demand/partners",
        b'{"name": "deep", "endpoint": "http://127.0.0.1:9/x", "venues": %s}',
        "venues[]",
    ),
)
LISTS = ("/api/v1/advertisers", "/api/v1/campaigns", "/api/v1/venues", "/api/v1/demand/partners")


@pytest.mark.parametrize("env", ENVIRONMENTS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("depth", DEPTHS)
def test_a_deep_management_body_is_a_400_naming_its_field_and_changes_nothing(
    live: LiveServer, http: httpx.Client, env: str, kind: str, depth: int
) -> None:
    """The management structs are strict (typed fields, unknown fields refused), so msgspec refuses a deep
    value at its first level, naming the field, before any recursion."""
    base, key = base_of(live, env), admin_of(live, env)
    headers = {"Ssp-Key": key, "Content-Type": "application/json"}
    listed = {path: http.get(f"{base}{path}", headers=headers).json() for path in LISTS}
    deep = nested(depth, kind)
    for method, path, template, field in MANAGEMENT:
        answer = http.request(method, f"{base}{path}", content=template % deep, headers=headers)
        # A list field names its first item when that item is the deep array, else itself.
        named = field.replace("[]", "[0]" if kind == "array" else "")
        assert_error(answer, 400, "invalid_field", named)
        whole = http.request(method, f"{base}{path}", content=deep, headers=headers)
        assert_error(whole, 400, "invalid_body", None)  # not the object the endpoint takes
    for path, before in listed.items():
        assert http.get(f"{base}{path}", headers=headers).json() == before


def test_a_body_nested_a_few_levels_is_read_as_before(live: LiveServer, http: httpx.Client) -> None:
    answer = post(
        http,
        f"{live.url}/api/v1/ad/request",
        key_of(live, "production"),
        b'{"venue_id": "%s", "play_time": %d, "extra": %s}'
        % (venue_of("production").encode(), int(time.time()) + 120, nested(30, "array")),
    )
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("raw", [b'{"play_time": 1e999}', b'{"x": -1e400}', b"[1e309]"])
def test_a_number_past_a_floats_range_is_invalid_json_not_a_500(raw: bytes) -> None:
    with pytest.raises(ApiError) as refused:
        decode_json(raw)
    assert (refused.value.status, refused.value.code, refused.value.field) == (400, "invalid_json", "body")
