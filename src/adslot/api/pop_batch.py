"""POST /api/v1/ad/pop/batch: an offline player's Proof of Play, uploaded when it is back online.

A screen that lost its connection keeps playing the ads it was given and remembers each fire with the time
it played it; once online it sends them here, up to MAX_FIRES at a time, with the account key it asked for
the ads with. Each fire is checked as the ad request's own pixels are, but against its `played_at`, not its
arrival: it counts when it was played within its ad request's play window (play_time less the clock skew,
to ad_request_expired_at) and arrives within ADSLOT_POP_UPLOAD_WINDOW_HOURS of being played. The ledger
stores played_at as the event's time, so the record and the play log show when the play happened.

The batch is checked whole before anything is stored: one malformed item refuses it (400, the item's index in
`error.field`), so a batch is never half stored for a bad input; so does, for a player-link key, one item
naming an ad request of its account issued for another screen (403 key_not_for_screen,
`fires[i].ad_request_uuid`). Sending a batch again counts nothing twice: every fire goes through the same
group commit and fired bits as a live pixel, one operation per item, so each (ad request, event, layer) counts
once whatever the number of copies, concurrent ones included. The answer is sent once every item's verdict is
committed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import NamedTuple

from adslot.api.ad_request import check_content_encoding, check_content_type
from adslot.api.auth import authenticate
from adslot.api.json_body import decode_json
from adslot.api.proof_of_play import LAYERS
from adslot.api.reply import NO_STORE, Reply, error_reply, json_reply
from adslot.auth.keys import SCOPE_AD_REQUEST, KeyRecord, check_ad_request_screen
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.ids import parse_uuid
from adslot.ledger.records import AdRequest, Fire, Verdict
from adslot.telemetry.metrics import count_pop
from adslot.vast.urls import EVENTS

PATH = "/api/v1/ad/pop/batch"
MAX_FIRES = 1000
MAX_BATCH_BYTES = 1 << 20
"""A full batch of long uuids and layers is about 150 KB; a body past 1 MiB is refused unread (413)."""
RESULTS = ("counted", "duplicate", "echo", "late", "released", "unknown", "invalid")
"""Every result an item can get, in the order the answer's `counts` lists them."""


class Item(NamedTuple):
    """One fire of a batch, checked."""

    ad_request_id: uuid.UUID
    event: str
    played_at: int
    layer: str


def _field(index: int, name: str | None = None) -> str:
    return f"fires[{index}]" if name is None else f"fires[{index}].{name}"


def _item(raw: object, index: int, now: int, skew: int) -> Item:
    if not isinstance(raw, dict):
        raise ApiError(400, "invalid_type", "each fire must be a JSON object", _field(index))
    text = raw.get("ad_request_uuid")
    if text is None or text == "":
        raise ApiError(400, "missing_field", "ad_request_uuid is required", _field(index, "ad_request_uuid"))
    parsed = parse_uuid(text) if isinstance(text, str) else None
    if parsed is None:
        raise ApiError(
            400,
            "malformed_ad_request_uuid",
            "ad_request_uuid is not a UUID",
            _field(index, "ad_request_uuid"),
        )
    event = raw.get("event")
    if event is None or event == "":
        raise ApiError(400, "missing_field", "event is required", _field(index, "event"))
    if event not in EVENTS:
        raise ApiError(
            400, "unknown_event", f"event must be one of {', '.join(EVENTS)}", _field(index, "event")
        )
    if "played_at" not in raw:
        raise ApiError(400, "missing_field", "played_at is required", _field(index, "played_at"))
    played_at = raw["played_at"]
    if type(played_at) is not int or played_at < 0:
        raise ApiError(
            400,
            "invalid_type",
            "played_at must be an integer (UTC epoch seconds)",
            _field(index, "played_at"),
        )
    if played_at > now + skew:
        raise ApiError(
            400,
            "played_at_in_future",
            f"played_at is {played_at - now} s in the future; at most {skew} s of clock skew is tolerated",
            _field(index, "played_at"),
        )
    layer = raw.get("layer")
    if layer is None:
        layer = "wrapper"
    elif layer not in LAYERS:
        raise ApiError(400, "invalid_layer", "layer must be wrapper or inline", _field(index, "layer"))
    return Item(parsed, str(event), played_at, str(layer))


def parse_batch(raw: bytes, now: int, skew: int) -> list[Item]:
    """Every fire of the body, checked, or the ApiError of the first thing wrong (nothing is stored then)."""
    if len(raw) > MAX_BATCH_BYTES:
        raise ApiError(413, "payload_too_large", f"the body may be at most {MAX_BATCH_BYTES} bytes", "body")
    body = decode_json(raw)
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object", "body")
    if "fires" not in body:
        raise ApiError(400, "missing_field", "fires is required", "fires")
    fires = body["fires"]
    if not isinstance(fires, list):
        raise ApiError(400, "invalid_type", "fires must be an array of fires", "fires")
    if not fires:
        raise ApiError(400, "empty_batch", "fires holds no fire: send at least one", "fires")
    if len(fires) > MAX_FIRES:
        raise ApiError(
            413, "batch_too_large", f"a batch holds at most {MAX_FIRES} fires, got {len(fires)}", "fires"
        )
    return [_item(raw_item, index, now, skew) for index, raw_item in enumerate(fires)]


def check_screens(account: KeyRecord, items: list[Item], records: dict[uuid.UUID, AdRequest | None]) -> None:
    """Refuse the whole batch, before anything of it is stored, if a player-link key names an ad request of
    its account issued for another screen: 403 key_not_for_screen, `error.field` the first such fire's
    ad_request_uuid, as a malformed fire refuses it. A tuple compare per fire on the rows the batch reads
    anyway; nothing for a key bound to no screen."""
    screen = account.screen
    if screen is None:
        return
    for index, item in enumerate(items):
        record = records[item.ad_request_id]
        if record is not None and (record.venue_id, record.screen_id) != screen:
            field = _field(index, "ad_request_uuid")  # only then: an own fire costs the compare alone
            check_ad_request_screen(account, record.account_id, record.venue_id, record.screen_id, field)


def _judged(
    item: Item, record: AdRequest | None, account_id: int, now: int, env: Environment
) -> tuple[str, str | None] | None:
    """The answer an item gets without the ledger, or None: the ledger decides (counted, duplicate, ...)."""
    if record is None or record.account_id != account_id:
        return "unknown", None  # another account's ad request is unknown to this key, as a missing one
    settings = env.settings
    waited = now - item.played_at
    if waited > settings.pop_upload_window_seconds:
        hours = settings.pop_upload_window_seconds // 3600
        return "late", f"arrived {waited} s after played_at; fires are counted up to {hours} h after play"
    if item.played_at > record.expires_at:
        return "late", f"played {item.played_at - record.expires_at} s after ad_request_expired_at"
    if item.played_at < record.play_time - settings.play_time_skew_seconds:
        return "invalid", f"played {record.play_time - item.played_at} s before the ad request's play_time"
    return None


def _answer(verdict: Verdict) -> tuple[str, str | None]:
    outcome = verdict.outcome
    if outcome == "invalid":
        # Which rule flagged it is for the reports, not for the player (it could learn to evade it).
        return "invalid", "invalid_traffic"
    if outcome == "late":
        return "late", "played after ad_request_expired_at"
    return outcome, None


async def handle_pop_batch(
    env: Environment,
    *,
    key: str | None,
    content_type: str | None,
    content_encoding: str | None,
    body: bytes,
    source: int = 0,
) -> Reply:
    """Check the whole batch, answer what needs no ledger, record the rest in the group commit, and answer
    each item in order once all are committed. `source`: the uploading client's network (api/sources.py)."""
    try:
        account = await authenticate(env, key, SCOPE_AD_REQUEST)
        check_content_type(content_type)
        check_content_encoding(content_encoding)
        now = int(time.time())
        items = parse_batch(body, now, env.settings.play_time_skew_seconds)
    except ApiError as error:
        return error_reply(error, NO_STORE)
    ids = list(dict.fromkeys(item.ad_request_id for item in items))
    records = dict(zip(ids, await env.store.get_many(ids), strict=True))
    try:
        check_screens(account, items, records)
    except ApiError as error:
        return error_reply(error, NO_STORE)
    answers: list[tuple[str, str | None] | None] = []
    pending: list[tuple[int, asyncio.Future[Verdict]]] = []
    for index, item in enumerate(items):
        judged = _judged(item, records[item.ad_request_id], account.account_id, now, env)
        answers.append(judged)
        if judged is None:
            fire = Fire(item.ad_request_id, item.event, item.layer, item.played_at, source)
            pending.append((index, env.writer.enqueue(fire)))
    if pending:
        verdicts = await asyncio.gather(*(future for _, future in pending))
        for (index, _), verdict in zip(pending, verdicts, strict=True):
            answers[index] = _answer(verdict)
    results: list[dict[str, object]] = []
    counts: Counter[str] = Counter()
    for index, (item, answer) in enumerate(zip(items, answers, strict=True)):
        assert answer is not None
        result, reason = answer
        counts[result] += 1
        count_pop(env.name, item.event, result)
        entry: dict[str, object] = {
            "index": index,
            "ad_request_uuid": str(item.ad_request_id),
            "event": item.event,
            "layer": item.layer,
            "result": result,
        }
        if reason is not None:
            entry["reason"] = reason
        results.append(entry)
    data = {"results": results, "counts": {result: counts[result] for result in RESULTS}}
    return json_reply(200, data, NO_STORE)
