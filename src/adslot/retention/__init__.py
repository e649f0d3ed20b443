"""Bounded data: old ad requests rolled up into report aggregates and deleted (ADSLOT_RETENTION_DAYS)."""
