"""The headers of every answer whose body is VAST markup, adslot's or a buyer's.

A bid's VAST is a third party's XML, and XML opened as a page runs the XHTML `<script>` an `Extension` may
carry, on adslot's origin. Players read VAST with fetch or XHR, which neither header restricts; a browser
opening it as a document is forbidden to sniff it into HTML and to run any script or load anything.
"""

from __future__ import annotations

NO_SCRIPT_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-content-type-options", "nosniff"),
    ("content-security-policy", "sandbox; default-src 'none'"),
)
