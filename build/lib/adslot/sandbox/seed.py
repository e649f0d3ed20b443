"""The sandbox's shared testing key and demo inventory, created once on first start.

A fresh install must fill an ad request at once, so the sandbox holds a campaign that runs in every venue
with a short video that adslot serves itself.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import sqlalchemy as sa

from adslot.auth.keys import SCOPE_AD_REQUEST, TEST_PREFIX, new_key
from adslot.auth.repository import restrict_scopes, store_known_key
from adslot.campaigns.repository import add_creative, create_advertiser, create_campaign
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version, get_meta, set_meta

TESTING_KEY_META = "sandbox_testing_key"
NO_FILL_VENUE = "sandbox-no-fill"
DEMO_MEDIA_PATH = "/media/demo.mp4"
DEMO_MEDIA_FILE = Path(__file__).parent / "assets" / "demo.mp4"
TEN_YEARS = 10 * 365 * 86400


def testing_key(conn: sa.Connection) -> str | None:
    return get_meta(conn, TESTING_KEY_META)


def seed_sandbox(conn: sa.Connection) -> str:
    """Create the shared key and demo campaign if missing; return the shared key.

    The shared key is published on the playground page, so it may only ask for ads (and read and release its
    own): administering the sandbox takes a key of its own, as in production. A key made admin before is
    narrowed here, at every start."""
    existing = testing_key(conn)
    if existing:
        if restrict_scopes(conn, existing, SCOPE_AD_REQUEST):
            bump_version(conn)
        return existing
    key = new_key(TEST_PREFIX)
    store_known_key(
        conn,
        key=key,
        account="sandbox-testers",
        scopes=SCOPE_AD_REQUEST,
        label="shared testing key",
    )
    set_meta(conn, TESTING_KEY_META, key)
    advertiser = create_advertiser(conn, AdvertiserIn(name="adslot demo advertiser", category="demo"))
    now = int(time.time())
    campaign = create_campaign(
        conn,
        CampaignIn(
            advertiser_id=advertiser.id,
            name="Sandbox demo campaign",
            start_at=now - 86400,
            end_at=now + TEN_YEARS,
            venue_ids=None,
            tier="house",  # any campaign a sandbox user adds outranks the demo
        ),
    )
    media = DEMO_MEDIA_FILE.read_bytes()
    add_creative(
        conn,
        campaign.id,
        CreativeIn(
            name="adslot demo video",
            media_url=DEMO_MEDIA_PATH,
            mime_type="video/mp4",
            width=640,
            height=360,
            duration_seconds=10,
            bitrate_kbps=50,
            size_bytes=len(media),
            sha256=hashlib.sha256(media).hexdigest(),
        ),
    )
    bump_version(conn)
    return key
