"""Whether a partner's markup is a VAST ad adslot can serve, found at a cost the partner cannot inflate.

The markup is the partner's, so checking it must cost adslot bounded CPU on the event loop whatever it holds.
A document type declaration is refused the moment the parser meets it, before its internal subset is read:
the VAST a partner may send has no use for one, and a DTD's entities are what a "billion laughs" expands
(expat 2.4 or later does refuse that expansion, but only after it has cost tens of milliseconds). Without a
DTD the parser expands nothing but the five predefined entities and character references, so its work grows
with the bytes parsed and the elements met; nesting is capped at MAX_DEPTH, and an answer's markups share
one `Budget` of bytes and elements. The check runs expat directly, with no tree built: defusedxml refuses
DTDs the same way (these handlers) but parses through ElementTree's pure-Python parser and caps no depth.

Pure: no I/O. `MarkupChecks` remembers the verdict of each distinct markup (by its BLAKE2b digest), so a
markup a partner sends again costs a hash, not a parse.
"""

from __future__ import annotations

import hashlib
import pyexpat
from collections import OrderedDict
from dataclasses import dataclass

MAX_DEPTH = 32
"""Elements nested deeper are refused: VAST 2.0 nests 8 deep, its Extensions a few more."""
ANSWER_BYTES = 256 * 1024
"""Markup bytes parsed for one partner's answer (a VAST document is a few KiB): about 3 ms of expat."""
ANSWER_ELEMENTS = 2000
"""Elements met in one answer's markups (a VAST document has tens to a few hundred): about 1 ms."""
VERDICTS = 4096
"""Distinct markups whose verdicts `MarkupChecks` remembers; each costs about 200 bytes."""

_BOM = b"\xef\xbb\xbf"
_BLANK = b" \t\r\n"
"""A byte-order mark and blank lines a bidder's template left before the XML declaration are tolerated."""


class NotVast(ValueError):
    """The markup is not a VAST document adslot can add its pixels to."""


class UnsafeMarkup(NotVast):
    """The markup declares a DTD or entities, or nests past MAX_DEPTH: made to cost a parser, not to play."""


class OverBudget(NotVast):
    """Checking the markup would take the answer past its `Budget`; no verdict on the markup itself."""


@dataclass(slots=True)
class Budget:
    """What is left of one answer's markup checking: bytes to parse and elements to meet."""

    bytes: int = ANSWER_BYTES
    elements: int = ANSWER_ELEMENTS


class _Refused(Exception):
    """Raised from a parser handler: expat stops at once, and the reason is re-raised as a NotVast."""

    def __init__(self, error: NotVast) -> None:
        super().__init__(str(error))
        self.error = error


def check_vast(markup: str | bytes, budget: Budget | None = None) -> None:
    """One well-formed VAST document whose first Ad is an InLine or a Wrapper: else NotVast, saying why.

    UnsafeMarkup for a DTD, an entity declaration or nesting past MAX_DEPTH; OverBudget when `budget` (spent
    by this call) runs out first. Without a budget, only the markup's own limits apply."""
    data = (markup.encode() if isinstance(markup, str) else markup).lstrip(_BLANK)
    data = data.removeprefix(_BOM).lstrip(_BLANK)
    if budget is not None:
        if len(data) > budget.bytes:
            raise OverBudget(f"{len(data)} bytes of markup past the {budget.bytes} left to check")
        budget.bytes -= len(data)
    elements = left = budget.elements if budget is not None else None
    depth = 0
    ads = 0
    layer = False

    def start(name: str, _attributes: object) -> None:
        nonlocal depth, ads, layer, elements
        depth += 1
        if depth > MAX_DEPTH:
            raise _Refused(UnsafeMarkup(f"elements nested deeper than {MAX_DEPTH}"))
        if elements is not None:
            elements -= 1
            if elements < 0:
                raise _Refused(OverBudget(f"more elements than the {left} left to check"))
        if depth == 1:
            if name != "VAST":
                raise _Refused(NotVast(f"the root element is <{name}>, not <VAST>"))
        elif depth == 2 and name == "Ad":
            ads += 1
        elif depth == 3 and ads == 1 and name in ("InLine", "Wrapper"):
            layer = True

    def end(_name: str) -> None:
        nonlocal depth
        depth -= 1

    def doctype(*_declaration: object) -> None:
        raise _Refused(UnsafeMarkup("a document type declaration (DTD), which VAST has no use for"))

    def entity(*_declaration: object) -> None:
        raise _Refused(UnsafeMarkup("an entity declaration, which VAST has no use for"))

    parser = pyexpat.ParserCreate(namespace_separator="}")  # a namespaced name never equals a bare one
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.UnparsedEntityDeclHandler = entity
    try:
        parser.Parse(data, True)
    except _Refused as refused:
        raise refused.error from None
    except pyexpat.ExpatError as error:
        raise NotVast(f"not well-formed XML: {error}") from None
    finally:
        if budget is not None and elements is not None:
            budget.elements = max(elements, 0)
    if not layer:
        raise NotVast("no <Ad> with an <InLine> or a <Wrapper>")


Verdict = tuple[type[NotVast], str] | None
"""None: the markup is VAST; else why not, as the exception to raise and its message."""


class MarkupChecks:
    """`check_vast` with the verdict of each distinct markup remembered, the most recent VERDICTS of them.

    One per process and environment, used from one event loop. An OverBudget is no verdict on the markup,
    so it is not remembered."""

    def __init__(self, size: int = VERDICTS) -> None:
        self.size = size
        self._verdicts: OrderedDict[bytes, Verdict] = OrderedDict()

    def check(self, data: bytes, budget: Budget | None = None) -> None:
        key = hashlib.blake2b(data, digest_size=16).digest()
        verdicts = self._verdicts
        if key in verdicts:
            verdicts.move_to_end(key)
            known = verdicts[key]
            if known is not None:
                raise known[0](known[1])
            return
        try:
            check_vast(data, budget)
        except OverBudget:
            raise
        except NotVast as error:
            self._remember(key, (type(error), str(error)))
            raise
        self._remember(key, None)

    def _remember(self, key: bytes, verdict: Verdict) -> None:
        self._verdicts[key] = verdict
        if len(self._verdicts) > self.size:
            self._verdicts.popitem(last=False)
