"""The sandbox's shared testing key and demo inventory, created once on first start.

A fresh install must fill an ad request at once, so the sandbox holds a campaign that runs in every venue
with a short video that adslot serves itself; and programmatic demand must be tried without a buyer, so one
venue, `programmatic-lobby`, has the built-in demo bidder (demo_bidder.py) as its only partner.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

from adslot.auth.keys import SCOPE_AD_REQUEST, TEST_PREFIX, new_key
from adslot.auth.repository import restrict_scopes, store_known_key
from adslot.campaigns.repository import add_creative, create_advertiser, create_campaign
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version, get_meta, set_meta
from adslot.demand.partners import PartnerIn, PartnerPatch
from adslot.demand.repository import create_partner, update_partner
from adslot.errors import ApiError
from adslot.inventory.repository import create_venue
from adslot.inventory.schemas import VenueIn
from adslot.sandbox.demo_bidder import demo_bidder_endpoint
from adslot.storage.tables import demand_partners, venues

TESTING_KEY_META = "sandbox_testing_key"
NO_FILL_VENUE = "sandbox-no-fill"
DEMO_MEDIA_PATH = "/media/demo.mp4"
DEMO_MEDIA_FILE = Path(__file__).parent / "assets" / "demo.mp4"
TEN_YEARS = 10 * 365 * 86400
PROGRAMMATIC_VENUE = VenueIn(
    venue_id="programmatic-lobby",
    name="Programmatic lobby (built-in demo bidder)",
    timezone="Europe/Berlin",
    latitude=52.5251,
    longitude=13.3694,
    venue_type="70102",  # OpenOOH 1.1: office buildings, lobby
    country="DE",
    city="Berlin",
    impressions_per_play=12.5,
)
"""The one sandbox venue partners may bid on; its geo, type and audience fill what a DSP reads."""
DEMO_PARTNER = "demo-bidder"


def testing_key(conn: sa.Connection) -> str | None:
    return get_meta(conn, TESTING_KEY_META)


def seed_sandbox(conn: sa.Connection, public_url: str | None = None) -> str:
    """Create what is missing of the shared key, the demo campaign and the programmatic demo; return the
    shared key. Run at every start, so it changes nothing that is already right: the catalog version is
    bumped (every worker reloads) only when something was written.

    The shared key is published on the playground page, so it may only ask for ads (and read and release its
    own): administering the sandbox takes a key of its own, as in production. A key made admin before is
    narrowed here, at every start.

    `public_url` is the sandbox's base URL as served (EnvironmentSettings.public_url), where the demo bidder
    is reached; None (a command other than `adslot serve`) leaves the programmatic demo as it is."""
    key, changed = _shared_key_and_campaign(conn)
    if public_url is not None:
        changed = seed_programmatic_demo(conn, public_url) or changed
    if changed:
        bump_version(conn)
    return key


def _shared_key_and_campaign(conn: sa.Connection) -> tuple[str, bool]:
    """The shared key, and whether anything was written."""
    existing = testing_key(conn)
    if existing:
        return existing, restrict_scopes(conn, existing, SCOPE_AD_REQUEST)
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
    return key, True


def seed_programmatic_demo(conn: sa.Connection, public_url: str) -> bool:
    """The venue `programmatic-lobby` and its only partner, `demo-bidder`, whose endpoint is the built-in
    bidder under `public_url`; return whether anything was written.

    Made once and left as the media owner changes them afterwards, but for the endpoint, which follows the
    public URL: a partner pointing at an old address would only time out. Several nodes seed under one lock
    (storage/migrate.py); a create that meets a concurrent one's row anyway is taken as done."""
    changed = False
    venue = sa.select(venues.c.venue_id).where(venues.c.venue_id == PROGRAMMATIC_VENUE.venue_id)
    if conn.execute(venue).first() is None:
        changed = _create_once(conn, lambda: create_venue(conn, PROGRAMMATIC_VENUE))
    endpoint = demo_bidder_endpoint(public_url)
    current = conn.execute(
        sa.select(demand_partners.c.endpoint).where(demand_partners.c.name == DEMO_PARTNER)
    ).scalar()
    if current is None:
        partner = PartnerIn(
            name=DEMO_PARTNER,
            endpoint=endpoint,
            timeout_ms=150,
            floor_cpm=0.5,
            currency="USD",
            auction="first",
            venues=[PROGRAMMATIC_VENUE.venue_id],
            auto_approve=True,
        )
        changed = _create_once(conn, lambda: create_partner(conn, partner)) or changed
    elif current != endpoint:
        update_partner(conn, DEMO_PARTNER, PartnerPatch(endpoint=endpoint))
        changed = True
    return changed


def _create_once(conn: sa.Connection, create: Callable[[], object]) -> bool:
    """Run `create` in a savepoint; False when its row exists already (409), which leaves the transaction
    usable (on PostgreSQL a failed statement outside a savepoint would abort it)."""
    try:
        with conn.begin_nested():
            create()
    except ApiError as exc:
        if exc.status != 409:
            raise
        return False
    return True
