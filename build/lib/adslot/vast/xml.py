"""XML text, attribute and CDATA escaping that no input can break out of.

Values reach VAST from players (venue and screen ids) and from operators (titles, URLs), so every one is
escaped here; characters XML 1.0 forbids are replaced rather than dropped, so lengths stay visible.
"""

from __future__ import annotations

import re

_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_safe(value: str) -> str:
    """Replace characters that are not allowed anywhere in an XML 1.0 document."""
    return _FORBIDDEN.sub("\ufffd", value)


def cdata(value: str) -> str:
    """Wrap in CDATA; a `]]>` inside the value is split across two sections.

    A carriage return goes between sections as `&#13;`: parsers turn a literal one, even in CDATA, into `\\n`.
    """
    escaped = xml_safe(value).replace("]]>", "]]]]><![CDATA[>").replace("\r", "]]>&#13;<![CDATA[")
    return "<![CDATA[" + escaped + "]]>"


def text(value: str) -> str:
    escaped = xml_safe(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("\r", "&#13;")


def attr(value: str) -> str:
    """Also encode tab and newline, which attribute-value normalization would otherwise turn into spaces."""
    return text(value).replace('"', "&quot;").replace("\t", "&#9;").replace("\n", "&#10;")
