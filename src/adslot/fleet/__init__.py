"""The fleet: each screen's status, venues' opening hours, and the alerts raised when screens go silent."""
