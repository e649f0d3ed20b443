"""The OpenAPI document each environment serves at {base}/openapi.json describes all of the API.

Every endpoint (the hot paths the fast lane serves, their HEAD variants, the management API) with its methods;
the SspKey security scheme and which operations need it; the environment's own base URL as the first server;
and every error answer as the error envelope of architecture.md.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from adslot.routes import AD_REQUEST_PATHS, IMPRESSION_PATHS, TRACKING_PATHS, VAST
from tests.conftest import LiveServer

ENVIRONMENTS = ["production", "sandbox"]
HOT = {
    ("post", "/api/v1/ad/request"),
    ("post", "/ad/request"),
    ("get", "/api/v1/ad/request/{ad_request_uuid}"),
    ("get", "/api/v1/ad/vast/{ad_request_uuid}"),
    ("get", "/api/v1/ad/callback"),
    ("head", "/api/v1/ad/callback"),
    ("get", "/api/v1/ad/tracking/video"),
    ("head", "/api/v1/ad/tracking/video"),
    ("post", "/api/v1/ad/request/{ad_request_uuid}/release"),
    ("get", "/api/v1/ad/manifest"),
    ("post", "/api/v1/ad/pop/batch"),
}
PLAYER = {("get", "/api/v1/player/config"), ("post", "/api/v1/player/status")}
"""The reference player's own calls (adslot.player.api), keyed like the ad request."""
MANAGEMENT = {
    ("get", "/api/v1/advertisers"),
    ("post", "/api/v1/advertisers"),
    ("get", "/api/v1/campaigns"),
    ("post", "/api/v1/campaigns"),
    ("get", "/api/v1/campaigns/{campaign_id}"),
    ("patch", "/api/v1/campaigns/{campaign_id}"),
    ("post", "/api/v1/campaigns/{campaign_id}/creatives"),
    ("get", "/api/v1/venues"),
    ("post", "/api/v1/venues"),
    ("get", "/api/v1/venues/{venue_id}"),
    ("patch", "/api/v1/venues/{venue_id}"),
    ("post", "/api/v1/venues/{venue_id}/screens"),
    ("patch", "/api/v1/campaigns/{campaign_id}/creatives/{creative_id}"),
    ("patch", "/api/v1/venues/{venue_id}/screens/{screen_id}"),
    ("post", "/api/v1/venues/import"),
    ("get", "/api/v1/reports/delivery"),
    ("get", "/api/v1/reports/demand"),
    ("get", "/api/v1/reports/playlog"),
    ("get", "/api/v1/demand/partners"),
    ("post", "/api/v1/demand/partners"),
    ("get", "/api/v1/demand/partners/{name}"),
    ("patch", "/api/v1/demand/partners/{name}"),
    ("delete", "/api/v1/demand/partners/{name}"),
    ("get", "/api/v1/demand/creatives"),
    ("get", "/api/v1/demand/creatives/{creative_id}"),
    ("get", "/api/v1/demand/creatives/{creative_id}/preview"),
    ("post", "/api/v1/demand/creatives/{creative_id}/approve"),
    ("post", "/api/v1/demand/creatives/{creative_id}/reject"),
    ("get", "/api/v1/screens"),
    ("get", "/api/v1/venues/{venue_id}/hours"),
    ("post", "/api/v1/venues/{venue_id}/hours"),
    ("get", "/api/v1/alerts"),
    ("get", "/api/v1/alerts/settings"),
    ("post", "/api/v1/alerts/settings"),
    ("get", "/api/v1/alerts/webhooks"),
    ("post", "/api/v1/alerts/webhooks"),
    ("delete", "/api/v1/alerts/webhooks/{webhook_id}"),
}
KEYED = {
    ("post", "/api/v1/ad/request"),
    ("post", "/ad/request"),
    ("get", "/api/v1/ad/request/{ad_request_uuid}"),
    ("post", "/api/v1/ad/request/{ad_request_uuid}/release"),
    ("get", "/api/v1/ad/manifest"),
    ("post", "/api/v1/ad/pop/batch"),
    *PLAYER,
}
PIXELS = {op for op in HOT if "callback" in op[1] or "tracking" in op[1]}
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
ERROR_ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}
EXPECTED_ERRORS = {
    ("post", "/api/v1/ad/request"): {400, 401, 403, 413, 415, 422},
    ("post", "/ad/request"): {400, 401, 403, 413, 415, 422},
    ("get", "/api/v1/ad/request/{ad_request_uuid}"): {400, 401, 403, 404},
    ("get", "/api/v1/ad/callback"): {400, 404, 410},
    ("get", "/api/v1/ad/tracking/video"): {400, 404, 410},
    ("get", "/api/v1/advertisers"): {400, 401, 403},
    ("post", "/api/v1/advertisers"): {400, 401, 403, 409, 422},
    ("post", "/api/v1/campaigns"): {400, 401, 403, 422},
    ("get", "/api/v1/campaigns/{campaign_id}"): {400, 401, 403, 404},
    ("patch", "/api/v1/campaigns/{campaign_id}"): {400, 401, 403, 404, 422},
    ("post", "/api/v1/campaigns/{campaign_id}/creatives"): {400, 401, 403, 404, 422},
    ("post", "/api/v1/venues"): {400, 401, 403, 409, 422},
    ("patch", "/api/v1/venues/{venue_id}"): {400, 401, 403, 404, 422},
    ("post", "/api/v1/venues/{venue_id}/screens"): {400, 401, 403, 404, 409},
    ("post", "/api/v1/ad/request/{ad_request_uuid}/release"): {400, 401, 403, 404, 409, 410},
    ("get", "/api/v1/ad/manifest"): {400, 401, 403, 422},
    ("post", "/api/v1/ad/pop/batch"): {400, 401, 403, 413, 415},
    ("get", "/api/v1/reports/delivery"): {400, 401, 403, 422},
    ("get", "/api/v1/reports/demand"): {400, 401, 403, 422},
    ("get", "/api/v1/reports/playlog"): {400, 401, 403},
    ("post", "/api/v1/venues/import"): {400, 401, 403, 413, 415},
}


def base_url(live: LiveServer, environment: str) -> str:
    return live.url if environment == "production" else live.sandbox_url


@pytest.fixture(params=ENVIRONMENTS)
def environment(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def document(live: LiveServer, http: httpx.Client, environment: str) -> dict[str, Any]:
    response = http.get(f"{base_url(live, environment)}/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    return body


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    }


def test_document_is_openapi_3_1_titled_with_the_environment(
    document: dict[str, Any], environment: str
) -> None:
    assert document["openapi"].startswith("3.1")
    assert environment in document["info"]["title"]


def test_document_lists_every_endpoint_with_its_methods_and_nothing_else(document: dict[str, Any]) -> None:
    assert set(operations(document)) == HOT | MANAGEMENT | PLAYER


def test_every_path_the_hot_lane_serves_is_documented(document: dict[str, Any]) -> None:
    documented = {path for _, path in operations(document)}
    for path in AD_REQUEST_PATHS | IMPRESSION_PATHS | TRACKING_PATHS:
        assert path.rstrip("/") in documented
    assert f"{VAST}{{ad_request_uuid}}" in documented


def test_every_operation_has_a_unique_operation_id(document: dict[str, Any]) -> None:
    ids = [operation.get("operationId") for operation in operations(document).values()]
    assert all(ids)
    assert len(ids) == len(set(ids))


def test_first_server_is_the_environment_base_url(
    document: dict[str, Any], live: LiveServer, environment: str
) -> None:
    assert document["servers"][0]["url"] == base_url(live, environment)


def test_ssp_key_security_scheme_is_an_api_key_in_the_ssp_key_header(document: dict[str, Any]) -> None:
    assert document["components"]["securitySchemes"]["SspKey"] == {
        "type": "apiKey",
        "name": "Ssp-Key",
        "in": "header",
    }


def test_keyed_operations_require_ssp_key_and_pixels_and_vast_need_none(document: dict[str, Any]) -> None:
    for key, operation in operations(document).items():
        if key in KEYED | MANAGEMENT:
            assert operation.get("security") == [{"SspKey": []}], key
        else:
            assert not operation.get("security"), key


def test_the_key_is_documented_by_the_security_scheme_not_as_a_parameter(document: dict[str, Any]) -> None:
    for key, operation in operations(document).items():
        names = {parameter["name"].lower() for parameter in operation.get("parameters", [])}
        assert "ssp-key" not in names, key


def test_every_error_answer_is_the_error_envelope_in_json(document: dict[str, Any]) -> None:
    for key, operation in operations(document).items():
        if key[0] == "head" or key[1].startswith("/api/v1/ad/vast/"):
            continue
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert response["content"] == {"application/json": {"schema": ERROR_ENVELOPE}}, (key, status)


def test_operations_document_the_error_statuses_they_answer(document: dict[str, Any]) -> None:
    documented = operations(document)
    for key, statuses in EXPECTED_ERRORS.items():
        assert statuses <= {int(status) for status in documented[key]["responses"]}, key


def test_a_403_that_a_player_link_key_can_get_names_both_its_codes(document: dict[str, Any]) -> None:
    """The ad request, the manifest and the player's config and status check a player-link key's screen:
    their 403 says which code means what, so that a client reading the document alone can tell a missing
    permission from a wrong screen."""
    for method, path in (
        ("post", "/api/v1/ad/request"),
        ("post", "/ad/request"),
        ("get", "/api/v1/ad/manifest"),
        ("get", "/api/v1/player/config"),
        ("post", "/api/v1/player/status"),
    ):
        description = document["paths"][path][method]["responses"]["403"]["description"]
        assert "insufficient_scope" in description, (path, description)
        assert "key_not_for_screen" in description, (path, description)


def test_the_403_of_a_release_or_batch_says_a_player_key_may_act_on_its_own_screens_ad_requests_only(
    document: dict[str, Any],
) -> None:
    """Release and batch Proof of Play take ad requests, not a venue and screen: their 403 says that a
    player-link key naming another screen's ad request gets key_not_for_screen, and which field says so."""
    for method, path, field in (
        ("post", "/api/v1/ad/request/{ad_request_uuid}/release", "`ad_request_uuid`"),
        ("post", "/api/v1/ad/pop/batch", "`fires[i].ad_request_uuid`"),
    ):
        description = document["paths"][path][method]["responses"]["403"]["description"]
        assert "insufficient_scope" in description, (path, description)
        assert "key_not_for_screen" in description and "ad request" in description, (path, description)
        assert field in description, (path, description)


def test_error_envelope_schema_has_status_and_code_message_field(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    envelope = schemas["ErrorEnvelope"]
    assert set(envelope["required"]) == {"status", "error"}
    assert envelope["properties"]["error"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert set(schemas["ErrorBody"]["required"]) == {"code", "message", "field"}


def test_ad_request_documents_its_json_body_format_query_and_both_answer_formats(
    document: dict[str, Any],
) -> None:
    for path in ("/api/v1/ad/request", "/ad/request"):
        operation = document["paths"][path]["post"]
        body = operation["requestBody"]
        assert body["required"] is True
        schema = body["content"]["application/json"]["schema"]
        assert set(schema["required"]) == {"venue_id", "play_time"}
        assert set(schema["properties"]) == {"venue_id", "screen_id", "play_time"}
        assert schema["properties"]["play_time"]["type"] == "integer"
        (format_parameter,) = (p for p in operation["parameters"] if p["name"] == "format")
        assert format_parameter["in"] == "query"
        assert format_parameter["schema"]["enum"] == ["json", "xml"]
        ok = operation["responses"]["200"]
        assert ok["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/AdRequestEnvelope"
        }
        assert ok["content"]["application/xml"]["schema"]["type"] == "string"
        assert {"X-Ad-Request-Uuid", "X-Ad-Request-Expired-At"} <= set(ok["headers"])
        assert "content" not in operation["responses"]["204"]


def test_tracking_urls_require_the_uuid_and_name_their_events(document: dict[str, Any]) -> None:
    for method, path in PIXELS:
        parameters = {p["name"]: p for p in document["paths"][path][method]["parameters"]}
        assert parameters["ad_request_uuid"]["in"] == "query"
        assert parameters["ad_request_uuid"]["required"] is True
        assert parameters["ad_request_uuid"]["schema"]["format"] == "uuid"
        assert parameters["layer"]["schema"]["enum"] == ["wrapper", "inline"]
        if "tracking" in path:
            assert parameters["event"]["required"] is True
            assert parameters["event"]["schema"]["enum"] == [
                "start",
                "firstQuartile",
                "midpoint",
                "thirdQuartile",
                "complete",
            ]


def test_head_variants_answer_the_get_statuses_without_a_body(document: dict[str, Any]) -> None:
    for path in ("/api/v1/ad/callback", "/api/v1/ad/tracking/video"):
        get_responses = document["paths"][path]["get"]["responses"]
        head_responses = document["paths"][path]["head"]["responses"]
        assert set(head_responses) == set(get_responses)
        assert all("content" not in response for response in head_responses.values())


def test_inline_vast_answers_xml_and_its_errors_are_empty_vast_with_an_error_header(
    document: dict[str, Any],
) -> None:
    responses = document["paths"]["/api/v1/ad/vast/{ad_request_uuid}"]["get"]["responses"]
    assert set(responses) == {"200", "400", "404", "410"}
    for status, response in responses.items():
        assert set(response["content"]) == {"application/xml"}
        if status != "200":
            assert response["headers"]["X-Adslot-Error"]["required"] is True


def test_document_carries_no_generated_examples_in_component_schemas(document: dict[str, Any]) -> None:
    for name, schema in document["components"]["schemas"].items():
        assert "examples" not in schema, name


def test_litestar_schema_path_serves_the_json_document_and_no_cdn_pages(
    live: LiveServer, http: httpx.Client, environment: str
) -> None:
    base = base_url(live, environment)
    response = http.get(f"{base}/schema")
    assert response.status_code == 200
    assert response.json()["info"]["title"] == f"adslot ({environment})"
    for page in ("swagger", "redoc", "elements", "rapidoc", "scalar"):
        assert http.get(f"{base}/schema/{page}").status_code == 404, page
