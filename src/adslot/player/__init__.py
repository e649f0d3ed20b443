"""adslot's reference player: a browser page adslot serves at {base}/player/, opened on a screen through its
player link. The page (static/) asks for ads, plays them on time and keeps its Proof of Play through outages;
this package serves it, makes its links and keys, its per-venue settings and records its status reports."""

from __future__ import annotations

from pathlib import Path

VERSION = "1.0.0"
"""The player's version: static/player.js and static/sw.js carry the same string (tests/player checks it)."""
STATIC = Path(__file__).parent / "static"
