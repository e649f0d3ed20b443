"""Reports over the ledger: delivery figures grouped by campaign, creative, venue, screen, day and hour, and
the raw play log (one row per played ad request).

The SQL lives in `repository` (one SQLAlchemy Core query per source, the same for SQLite and PostgreSQL);
everything else is pure: parsing the query (`query`), time-zone buckets (`buckets`), folding SQL groups into
report rows (`aggregate`) and rendering them as JSON or CSV (`formats`). `health` judges each API key's
go-live criteria (the console's Health page), its SQL beside its pure judgement.
"""
