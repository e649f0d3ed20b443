"""The serving tests drive the real ledger stores: the ledger tests' database fixtures, on both backends."""

from tests.ledger.conftest import db, ledger_database

__all__ = ["db", "ledger_database"]
