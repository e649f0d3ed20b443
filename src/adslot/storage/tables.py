"""The schema, defined once for SQLite and PostgreSQL; Alembic migrations are generated from it."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(128), nullable=False, unique=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("prefix", sa.String(32), nullable=False),
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("scopes", sa.String(256), nullable=False),
    sa.Column("label", sa.String(128), nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("revoked_at", sa.BigInteger, nullable=True),
)

# Small key/value facts about this environment's database, e.g. the sandbox's shared testing key and the
# catalog version that workers poll to know when to reload campaigns.
environment_meta = sa.Table(
    "environment_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

advertisers = sa.Table(
    "advertisers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(128), nullable=False, unique=True),
    sa.Column("category", sa.String(64), nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

campaigns = sa.Table(
    "campaigns",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("advertiser_id", sa.Integer, sa.ForeignKey("advertisers.id"), nullable=False),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("start_at", sa.BigInteger, nullable=False),
    sa.Column("end_at", sa.BigInteger, nullable=False),
    sa.Column("all_venues", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    # Decisioning (issue 3). Scalars are columns; the nested rules (targeting, exclusions, dayparts, caps,
    # frequency) are one JSON document, compiled into the in-memory index, never queried by SQL.
    sa.Column("tier", sa.String(16), nullable=False, server_default="standard"),
    sa.Column("weight", sa.Integer, nullable=False, server_default="100"),
    sa.Column("timezone", sa.String(64), nullable=False, server_default="UTC"),
    sa.Column("pacing", sa.String(8), nullable=False, server_default="asap"),
    sa.Column("cpm_micros", sa.BigInteger, nullable=True),
    sa.Column("share_of_voice", sa.Float, nullable=True),
    sa.Column("separation_minutes", sa.Integer, nullable=False, server_default="0"),
    sa.Column("rules", sa.Text, nullable=False, server_default="{}"),
)

campaign_venues = sa.Table(
    "campaign_venues",
    metadata,
    sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), primary_key=True),
    sa.Column("venue_id", sa.String(128), primary_key=True),
)

creatives = sa.Table(
    "creatives",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False, index=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("media_url", sa.String(2048), nullable=False),
    sa.Column("mime_type", sa.String(64), nullable=False),
    sa.Column("width", sa.Integer, nullable=False),
    sa.Column("height", sa.Integer, nullable=False),
    sa.Column("duration_seconds", sa.Integer, nullable=False),
    sa.Column("bitrate_kbps", sa.Integer, nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("weight", sa.Integer, nullable=False, server_default="100"),
    sa.Column("size_bytes", sa.BigInteger, nullable=True),
    sa.Column("sha256", sa.String(64), nullable=True),
)

venues = sa.Table(
    "venues",
    metadata,
    sa.Column("venue_id", sa.String(128), primary_key=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("latitude", sa.Float, nullable=True),
    sa.Column("longitude", sa.Float, nullable=True),
    sa.Column("venue_type", sa.String(64), nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("tags", sa.Text, nullable=False, server_default="[]"),
    sa.Column("country", sa.String(2), nullable=True),
    sa.Column("region", sa.String(64), nullable=True),
    sa.Column("city", sa.String(128), nullable=True),
    sa.Column("impressions_per_play", sa.Float, nullable=False, server_default="1.0"),
    # 168 multipliers (Monday 00h first, venue-local) or null: the audience by hour of week.
    sa.Column("hourly_impressions", sa.Text, nullable=True),
)

screens = sa.Table(
    "screens",
    metadata,
    sa.Column("venue_id", sa.String(128), sa.ForeignKey("venues.venue_id"), primary_key=True),
    sa.Column("screen_id", sa.String(128), primary_key=True),
    sa.Column("name", sa.String(256), nullable=True),
    sa.Column("width", sa.Integer, nullable=True),
    sa.Column("height", sa.Integer, nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("orientation", sa.String(16), nullable=True),
    sa.Column("mime_types", sa.Text, nullable=True),
    sa.Column("max_duration_seconds", sa.Integer, nullable=True),
)

# One row per ad request: the Proof-of-Play record, with the time each event was first counted.
ad_requests = sa.Table(
    "ad_requests",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),
    sa.Column("account_id", sa.Integer, nullable=False),
    sa.Column("venue_id", sa.String(128), nullable=False),
    sa.Column("screen_id", sa.String(128), nullable=True),
    sa.Column("play_time", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    # Null for an ad request a demand partner won (its win is in demand_wins): no campaign of this catalog.
    sa.Column("campaign_id", sa.Integer, nullable=True),
    sa.Column("creative_id", sa.Integer, nullable=True),
    sa.Column("impression_at", sa.BigInteger, nullable=True),
    sa.Column("start_at", sa.BigInteger, nullable=True),
    sa.Column("first_quartile_at", sa.BigInteger, nullable=True),
    sa.Column("midpoint_at", sa.BigInteger, nullable=True),
    sa.Column("third_quartile_at", sa.BigInteger, nullable=True),
    sa.Column("complete_at", sa.BigInteger, nullable=True),
    sa.Column("duplicate_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("late_count", sa.Integer, nullable=False, server_default="0"),
    # One bit per (event, VAST layer) whose first fire is stored (ledger.records.FIRE_BITS): a repeat finds
    # its bit set and is a duplicate; the first layer to fire an event sets its time, the other one echoes.
    sa.Column("fired", sa.Integer, nullable=False, server_default="0"),
    # Audience: impressions one play of this ad request is worth (the venue's multiplier at issue time).
    sa.Column("impressions", sa.Float, nullable=False, server_default="1.0"),
    # The reservations this ad request holds: JSON [[counter key, units], ...]; null when it holds none.
    sa.Column("claims", sa.Text, nullable=True),
    # Set once its reservations are settled: released early by the player ("released") or at expiry
    # ("expired"); a played ad request is settled at expiry too, with reason "played".
    sa.Column("settled_at", sa.BigInteger, nullable=True),
    sa.Column("settle_reason", sa.String(16), nullable=True),
    # The API key that asked for it (api_keys.id, no foreign key: the ledger writes without reading keys);
    # null for ad requests stored before migration 0009. The Health page reads it with the play_time index.
    sa.Column("key_id", sa.Integer, nullable=True),
    # The network the ad request came from (ledger.ivt.network_key: an IPv4 /16 or IPv6 /48 by default),
    # which a fire from another network is flagged foreign_network against; null when unknown.
    sa.Column("source_network", sa.BigInteger, nullable=True),
    # The creative's duration at issue time, which quartiles fired faster than it allows are flagged
    # too_fast against; null when unknown (rows stored before migration 0011).
    sa.Column("duration_seconds", sa.Integer, nullable=True),
    sa.Index(
        "ix_ad_requests_unsettled_expiry",
        "expires_at",
        sqlite_where=sa.text("settled_at IS NULL"),
        postgresql_where=sa.text("settled_at IS NULL"),
    ),
    sa.Index("ix_ad_requests_venue_play_time", "venue_id", "play_time"),
    sa.Index("ix_ad_requests_play_time", "play_time"),
    # PostgreSQL: each pixel rewrites the row; pages left half free keep its new version on the same page
    # (a HOT update, no index entries). Migration 0006 sets it on existing databases.
    postgresql_with={"fillfactor": 50},
)

# Reservations against caps, pacing and frequency: one row per counter key (e.g. a campaign's lifetime plays,
# its impressions on one day, a screen's plays of a campaign in one hour). Delivered + reserved never exceeds
# cap: the ledger checks and moves these under its write lock, in the batch that issues or settles.
delivery_counters = sa.Table(
    "delivery_counters",
    metadata,
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("cap", sa.BigInteger, nullable=True),
    sa.Column("reserved", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("delivered", sa.BigInteger, nullable=False, server_default="0"),
    # Competitive separation: the latest play_time of a category on a screen, and the gap it asked for.
    sa.Column("last_at", sa.BigInteger, nullable=True),
    # When the counter's hour or day ended (claims.closes_at); null for lifetime caps and separation, which
    # never close. The expiry sweep drops closed counters once the retention has passed.
    sa.Column("closes_at", sa.BigInteger, nullable=True),
    sa.Index("ix_delivery_counters_closes_at", "closes_at"),
)

# Fires the invalid-traffic rules flagged (ledger.ivt): kept with their reason, never counted. One row per
# (ad request, event, layer) at most: a flagged fire sets its event's fired bits (its repeats: duplicates).
# No foreign key, as for ad_requests.key_id; reports join it to ad_requests by id.
invalid_fires = sa.Table(
    "invalid_fires",
    metadata,
    sa.Column("ad_request_id", sa.Uuid, primary_key=True),
    sa.Column("event", sa.String(16), primary_key=True),
    sa.Column("layer", sa.String(8), primary_key=True),
    sa.Column("played_at", sa.BigInteger, nullable=False),  # the fire's time (a live pixel's: its arrival)
    sa.Column("reason", sa.String(32), nullable=False),  # too_fast, out_of_order, foreign_network, burst
)

# Ad requests per venue, screen and hour of play_time, filled or not: the denominator of fill rate.
request_stats = sa.Table(
    "request_stats",
    metadata,
    sa.Column("venue_id", sa.String(128), primary_key=True),
    sa.Column("screen_id", sa.String(128), primary_key=True),  # "" when the request named no screen
    sa.Column("hour", sa.BigInteger, primary_key=True),  # epoch seconds of the UTC hour of play_time
    sa.Column("requests", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("fills", sa.BigInteger, nullable=False, server_default="0"),
)

# Ad requests per API key (one player integration) and hour of play_time, filled or not: the Health page's
# request counts, written with request_stats in the same batch. No foreign key, as for ad_requests.key_id.
# Hour first in the primary key: the Health page reads a window of hours for every key, one range of it.
key_stats = sa.Table(
    "key_stats",
    metadata,
    sa.Column("key_id", sa.Integer, nullable=False, autoincrement=False),
    sa.Column("hour", sa.BigInteger, nullable=False),  # epoch seconds of the UTC hour of play_time
    sa.Column("requests", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("fills", sa.BigInteger, nullable=False, server_default="0"),
    sa.PrimaryKeyConstraint("hour", "key_id"),
)

# Settled ad requests older than ADSLOT_RETENTION_DAYS, rolled up (adslot.retention) before their rows are
# deleted: per 15-minute bucket of play_time (exact for every UTC offset in use, all multiples of 15 minutes),
# campaign, creative, venue and screen, each figure the delivery report sums (reporting.repository's
# delivery_figures, one column per figure, and the flagged fires per reason). Reports add these to what the
# live rows give; their invalid_fires rows are deleted with them.
report_rollups = sa.Table(
    "report_rollups",
    metadata,
    sa.Column("bucket", sa.BigInteger, primary_key=True),  # epoch seconds, a multiple of 900
    sa.Column("campaign_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("creative_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("venue_id", sa.String(128), primary_key=True),
    sa.Column("screen_id", sa.String(128), primary_key=True),  # "" when the requests named no screen
    sa.Column("fills", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("plays", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("impressions", sa.Float, nullable=False, server_default="0"),
    sa.Column("starts", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("first_quartiles", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("midpoints", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("third_quartiles", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("completes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("late", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("duplicates", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("expired", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("released", sa.BigInteger, nullable=False, server_default="0"),
    # Fires the invalid-traffic rules flagged (invalid_fires), per reason (ledger.ivt.RULES).
    sa.Column("invalid_too_fast", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("invalid_out_of_order", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("invalid_foreign_network", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("invalid_burst", sa.BigInteger, nullable=False, server_default="0"),
    sa.Index("ix_report_rollups_venue_id_bucket", "venue_id", "bucket"),
)

# The answer each worker's latest batch frames got, stored in the same transaction as the batch: a frame
# resent after its writer process died (committed or not, the worker cannot tell) is answered from here
# instead of being applied twice. One row per worker process and slot (its frame's sequence number modulo
# ANSWER_SLOTS), overwritten in place, so the table holds a few rows per worker started, not one per batch;
# the expiry sweep drops the rows of workers long gone.
ledger_answers = sa.Table(
    "ledger_answers",
    metadata,
    sa.Column("client", sa.LargeBinary(16), primary_key=True),  # random per worker process
    sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("at", sa.BigInteger, nullable=False),  # when the worker sent the frame (epoch seconds)
    sa.Column("answer", sa.LargeBinary, nullable=False),  # the verdicts frame, as the worker receives it
)

# The operator console (adslot.console). Users and their sign-in sessions live in the production database
# only: one set of people runs both environments. Each environment's own database keeps the audit log of
# what was changed in it, written in the transaction of the change.
console_users = sa.Table(
    "console_users",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("email", sa.String(254), nullable=False, unique=True),
    sa.Column("password_hash", sa.String(256), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("disabled_at", sa.BigInteger, nullable=True),
    # Failed sign-ins in a row, and until when the next attempt is refused (console.users.throttle).
    sa.Column("failed_sign_ins", sa.Integer, nullable=False, server_default="0"),
    sa.Column("locked_until", sa.BigInteger, nullable=False, server_default="0"),
)

console_sign_in_sources = sa.Table(
    "console_sign_in_sources",
    metadata,
    # A client address (an IPv6 one by its /64) and its failed sign-ins, whatever the accounts tried
    # (console.sign_in_sources): counted in the database, so that every worker and node sees them.
    sa.Column("source", sa.String(64), primary_key=True),
    sa.Column("failures", sa.Integer, nullable=False),
    sa.Column("last_failed_at", sa.BigInteger, nullable=False, index=True),
    sa.Column("locked_until", sa.BigInteger, nullable=False),
)

console_sessions = sa.Table(
    "console_sessions",
    metadata,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("console_users.id"), nullable=False, index=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
)

console_user_advertisers = sa.Table(
    "console_user_advertisers",
    metadata,
    # The advertisers (production's) whose campaigns an advertiser-role user may see (console.scope).
    sa.Column("user_id", sa.Integer, sa.ForeignKey("console_users.id"), primary_key=True),
    sa.Column("advertiser_id", sa.Integer, sa.ForeignKey("advertisers.id"), primary_key=True),
)

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("actor", sa.String(300), nullable=False),  # "user@example.com" or "cli"
    sa.Column("action", sa.String(64), nullable=False),  # e.g. "venue.create"
    sa.Column("target", sa.String(300), nullable=False),  # e.g. "venue lobby"
    sa.Column("before", sa.Text, nullable=True),  # JSON, null for a creation
    sa.Column("after", sa.Text, nullable=True),  # JSON, null for a deletion
)

# Demand partners (adslot.demand): the buyers' platforms adslot is to ask for bids over OpenRTB 2.6. Each
# environment's database holds its own, so a sandbox partner can never see production traffic.
demand_partners = sa.Table(
    "demand_partners",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),  # a slug: the CLI's and the URLs' handle
    sa.Column("endpoint", sa.String(2048), nullable=False),
    sa.Column("timeout_ms", sa.Integer, nullable=False),
    sa.Column("floor_cpm_micros", sa.BigInteger, nullable=False),  # micros of `currency`, as campaigns' cpm
    sa.Column("currency", sa.String(3), nullable=False),  # ISO 4217
    sa.Column("auction", sa.String(8), nullable=False),  # "first" or "second"
    sa.Column("max_qps", sa.Integer, nullable=True),  # null: no limit
    sa.Column("venues", sa.Text, nullable=True),  # JSON list of venue ids, sorted; null: every venue
    sa.Column("auto_approve", sa.Boolean, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # "active" or "paused"
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("deals", sa.Text, nullable=True),  # JSON list of DealIn; null: none
    sa.Column("blocked_domains", sa.Text, nullable=True),  # JSON list of lower-case domains; null: none
    sa.Column("notice_hosts", sa.Text, nullable=True),  # JSON list of hosts notices may go to; null: none
    sa.Column("auth_header_name", sa.String(128), nullable=True),  # sent with bid requests; null: none
    sa.Column("auth_header_value", sa.Text, nullable=True),  # never shown nor logged
)

# Creatives (OpenRTB `crid`) demand partners have bid, each held for the media owner's approval the first time
# it is seen from its partner (adslot.demand.creatives): one row per partner and crid, kept with the markup
# first seen so that what the media owner previews is what was bid. Deleted with their partner.
demand_creatives = sa.Table(
    "demand_creatives",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("partner_id", sa.Integer, sa.ForeignKey("demand_partners.id"), nullable=False, index=True),
    sa.Column("crid", sa.String(256), nullable=False),
    sa.Column("adomain", sa.Text, nullable=True),  # JSON list of the advertiser's domains, as bid
    sa.Column("adm", sa.Text, nullable=True),  # the VAST markup first seen; null when it came by nurl
    sa.Column("nurl", sa.String(2048), nullable=True),  # the URL that served the VAST, when adm is null
    sa.Column("status", sa.String(16), nullable=False),  # "pending", "approved" or "rejected"
    sa.Column("first_seen_at", sa.BigInteger, nullable=False),
    sa.Column("decided_at", sa.BigInteger, nullable=True),
    sa.Column("decided_by", sa.String(128), nullable=True),  # the audit log's actor
    sa.UniqueConstraint("partner_id", "crid"),
)

# The winning bid of each ad request a demand partner won (adslot.demand), written in the same transaction as
# the ad request. It holds what the inline VAST serves (the buyer's markup, its win macros substituted) and
# the billing notice's outbox: `bill_due_at` is set in the transaction that counts the ad request's first
# impression, and the sender (demand/billing.py) calls `burl` once and sets `billed_at`. No foreign key to
# the partner: its wins stay in the reports after it is removed (they name it by `partner`).
demand_wins = sa.Table(
    "demand_wins",
    metadata,
    sa.Column("ad_request_id", sa.Uuid, primary_key=True),
    sa.Column("partner", sa.String(64), nullable=False),
    sa.Column("demand_creative_id", sa.Integer, nullable=True),  # demand_creatives.id
    sa.Column("crid", sa.String(256), nullable=True),
    sa.Column("auction_id", sa.String(64), nullable=False),  # the bid request's id: ${AUCTION_ID}
    sa.Column("bid_id", sa.String(256), nullable=True),  # BidResponse.bidid: ${AUCTION_BID_ID}
    sa.Column("imp_id", sa.String(64), nullable=False),
    sa.Column("seat", sa.String(256), nullable=True),
    sa.Column("ad_id", sa.String(256), nullable=True),
    sa.Column("deal_id", sa.String(256), nullable=True),
    sa.Column("adomain", sa.Text, nullable=True),  # JSON list, as bid
    sa.Column("bid_price_micros", sa.BigInteger, nullable=False),
    sa.Column("price_micros", sa.BigInteger, nullable=False),  # the clearing CPM: ${AUCTION_PRICE}
    sa.Column("min_to_win_micros", sa.BigInteger, nullable=False),
    sa.Column("currency", sa.String(3), nullable=False),
    sa.Column("multiplier", sa.Float, nullable=False),  # impressions one play is worth, as sent (qty)
    sa.Column("adm", sa.Text, nullable=True),  # the VAST markup, win macros substituted; null: nurl serves it
    sa.Column("nurl", sa.Text, nullable=True),  # win macros substituted
    sa.Column("burl", sa.Text, nullable=True),  # a template: ${AUCTION_IMP_TS} is known only at the play
    sa.Column("play_time", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("bill_due_at", sa.BigInteger, nullable=True),  # when its impression was counted
    sa.Column("billed_at", sa.BigInteger, nullable=True),
    sa.Column("bill_attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("bill_claimed_until", sa.BigInteger, nullable=True),  # a sender holds it until then
    sa.Column("bill_error", sa.String(256), nullable=True),
    sa.Index("ix_demand_wins_partner_play_time", "partner", "play_time"),
    sa.Index(
        "ix_demand_wins_bill_due",
        "bill_due_at",
        sqlite_where=sa.text("billed_at IS NULL AND bill_due_at IS NOT NULL"),
        postgresql_where=sa.text("billed_at IS NULL AND bill_due_at IS NOT NULL"),
    ),
)

# What each demand partner was asked and answered, per UTC hour of the slots' play time: one row per partner,
# hour and metric (requests, bids, no_bids, timeouts, errors, dropped, skipped_qps, skipped_breaker,
# "drop:<reason>", "error:<reason>"), added to by each worker's flush (adslot.demand.stats).
demand_stats = sa.Table(
    "demand_stats",
    metadata,
    sa.Column("partner", sa.String(64), primary_key=True),
    sa.Column("hour", sa.BigInteger, primary_key=True),
    sa.Column("metric", sa.String(64), primary_key=True),
    sa.Column("count", sa.BigInteger, nullable=False),
)


campaign_share_links = sa.Table(
    "campaign_share_links",
    metadata,
    # A read-only link to one campaign's proof-of-play report (console.share_links): the token is stored
    # only as its SHA-256 hash, as keys are.
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False, index=True),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("label", sa.String(128), nullable=True),
    sa.Column("period_start", sa.BigInteger, nullable=False),
    sa.Column("period_end", sa.BigInteger, nullable=False),
    sa.Column("created_by", sa.String(300), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("revoked_at", sa.BigInteger, nullable=True),
    sa.Column("opens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_opened_at", sa.BigInteger, nullable=True),
)

# The reference player (adslot.player): keys made as one screen's player link, each venue's player settings,
# and each screen's last self-report.
player_keys = sa.Table(
    "player_keys",
    metadata,
    sa.Column("key_id", sa.Integer, sa.ForeignKey("api_keys.id"), primary_key=True, autoincrement=False),
    sa.Column("venue_id", sa.String(128), nullable=False),
    sa.Column("screen_id", sa.String(128), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Index("ix_player_keys_venue_screen", "venue_id", "screen_id"),
)

venue_players = sa.Table(
    "venue_players",
    metadata,
    sa.Column("venue_id", sa.String(128), sa.ForeignKey("venues.venue_id"), primary_key=True),
    sa.Column("slot_seconds", sa.Integer, nullable=False),
    sa.Column("lead_seconds", sa.Integer, nullable=False),
    sa.Column("fallback_urls", sa.Text, nullable=False, server_default="[]"),  # JSON list of media URLs
)

player_status = sa.Table(
    "player_status",
    metadata,
    sa.Column("venue_id", sa.String(128), primary_key=True),
    sa.Column("screen_id", sa.String(128), primary_key=True),  # "" when the player names no screen
    sa.Column("version", sa.String(32), nullable=False),
    sa.Column("fires_queued", sa.Integer, nullable=False),
    sa.Column("cache_bytes", sa.BigInteger, nullable=False),
    sa.Column("errors", sa.Integer, nullable=False),
    sa.Column("last_error", sa.String(512), nullable=True),
    sa.Column("last_ad_request_at", sa.BigInteger, nullable=True),
    sa.Column("reported_at", sa.BigInteger, nullable=False),
)

# Each screen's last ad request, fill and counted play, kept by the ledger writer with each batch (one upsert
# row per screen a batch names), and the checker's rolling window of fills and plays (the "not playing" rule).
# screen_id "" when the requests named no screen. No foreign key: an unregistered screen is recorded too.
screen_status = sa.Table(
    "screen_status",
    metadata,
    sa.Column("venue_id", sa.String(128), primary_key=True),
    sa.Column("screen_id", sa.String(128), primary_key=True),
    sa.Column("first_seen_at", sa.BigInteger, nullable=False),
    sa.Column("last_request_at", sa.BigInteger, nullable=True),
    sa.Column("last_fill_at", sa.BigInteger, nullable=True),
    sa.Column("last_play_at", sa.BigInteger, nullable=True),
    sa.Column("window_start", sa.BigInteger, nullable=False),
    sa.Column("window_fills", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("window_plays", sa.BigInteger, nullable=False, server_default="0"),
)

# Counted plays (first impressions) per screen and UTC hour of the play, written with screen_status.
screen_plays = sa.Table(
    "screen_plays",
    metadata,
    sa.Column("venue_id", sa.String(128), primary_key=True),
    sa.Column("screen_id", sa.String(128), primary_key=True),
    sa.Column("hour", sa.BigInteger, primary_key=True),
    sa.Column("plays", sa.BigInteger, nullable=False, server_default="0"),
)

# A venue's opening hours (fleet/hours.py's JSON): silence while it is closed raises no alert.
venue_hours = sa.Table(
    "venue_hours",
    metadata,
    sa.Column("venue_id", sa.String(128), sa.ForeignKey("venues.venue_id"), primary_key=True),
    sa.Column("schedule", sa.Text, nullable=False),
)

# One row per alert episode: unique per (kind, subject, episode), so that of several nodes that see the same
# silence only one raises it (the one whose insert lands), and only one clears it (cleared_at set once).
alerts = sa.Table(
    "alerts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),  # screen_silent, venue_dark, not_playing
    sa.Column("venue_id", sa.String(128), nullable=False),
    sa.Column("screen_id", sa.String(128), nullable=False),  # "" for a venue alert
    sa.Column("episode", sa.BigInteger, nullable=False),  # the silence's start (last request) or window start
    sa.Column("raised_at", sa.BigInteger, nullable=False),
    sa.Column("cleared_at", sa.BigInteger, nullable=True, index=True),
    sa.Column("detail", sa.Text, nullable=False),
    sa.UniqueConstraint("kind", "venue_id", "screen_id", "episode", name="uq_alerts_episode"),
)

alert_webhooks = sa.Table(
    "alert_webhooks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("url", sa.String(2048), nullable=False),
    sa.Column("secret", sa.String(128), nullable=False),  # the HMAC key; shown once, when created
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("removed_at", sa.BigInteger, nullable=True),
)

# The outbox: one row per (alert notice, receiver), written in the transaction that raises or clears the
# alert; sent in id order per receiver (channel, target), retried with backoff until delivered.
alert_deliveries = sa.Table(
    "alert_deliveries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("alert_id", sa.Integer, sa.ForeignKey("alerts.id"), nullable=False),
    sa.Column("event", sa.String(16), nullable=False),  # raised, cleared
    sa.Column("channel", sa.String(16), nullable=False),  # webhook, email
    sa.Column("target", sa.String(2048), nullable=False),  # webhook id, or the email address
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("next_at", sa.BigInteger, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("claimed_until", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("delivered_at", sa.BigInteger, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Index("ix_alert_deliveries_pending", "delivered_at", "channel", "target", "id"),
)

alert_attempts = sa.Table(
    "alert_attempts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("delivery_id", sa.Integer, sa.ForeignKey("alert_deliveries.id"), nullable=False, index=True),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("ok", sa.Boolean, nullable=False),
    sa.Column("status", sa.Integer, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
)
