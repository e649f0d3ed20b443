"""The hot paths of the contract (spec section 4.2), each named once.

The URL builders of the VAST (vast/urls.py), the HTTP protocol's hot lane (api/protocol.py, through
api/hot_paths.py) and the framework's handlers that document them (api/hot_routes.py) all read this table,
so a path can only change in one place. Paths are relative to an environment's mount (`/sandbox` or none).
"""

from __future__ import annotations

AD_REQUEST = "/api/v1/ad/request"
AD_REQUEST_SHORT = "/ad/request"
"""The spec's short form of the ad request's path, served the same."""
VAST = "/api/v1/ad/vast/"
"""Followed by the ad request's uuid."""
IMPRESSION = "/api/v1/ad/callback/"
TRACKING = "/api/v1/ad/tracking/video/"

AD_REQUEST_PATHS = frozenset({AD_REQUEST, AD_REQUEST_SHORT})
IMPRESSION_PATHS = frozenset({IMPRESSION, IMPRESSION.rstrip("/")})
"""The VAST writes the pixels with a trailing slash; players that drop it are served too."""
TRACKING_PATHS = frozenset({TRACKING, TRACKING.rstrip("/")})
