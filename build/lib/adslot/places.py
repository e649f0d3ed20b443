"""Where things are: IANA time zones and ISO 3166-1 alpha-2 country codes, checked the same way for venues,
campaigns and their targeting, so a typo ("UK", "Europe/Berlinn") is refused instead of never matching."""

from __future__ import annotations

import zoneinfo
from functools import lru_cache

from adslot.errors import ApiError

# ISO 3166-1 alpha-2, officially assigned codes, plus XK (Kosovo), which ad and geo databases use widely.
_ASSIGNED = """
AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ
BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM
DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS
GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN
KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ
MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM
PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV
SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI
VN VU WF WS YE YT ZA ZM ZW XK
"""
COUNTRIES = frozenset(_ASSIGNED.split())


@lru_cache(maxsize=1024)
def is_timezone(name: str) -> bool:
    """True for a name the IANA database knows; cached, as a bulk import checks the same few names often."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def check_timezone(name: str, field: str = "timezone") -> None:
    """Refuse a time zone that is not in the IANA database: dayparts and daily caps count hours in it."""
    if not is_timezone(name):
        raise ApiError(422, "invalid_timezone", f"{name!r} is not an IANA time zone", field)


def country_code(code: str, field: str) -> str:
    """The code in upper case if it is an ISO 3166-1 alpha-2 country; otherwise 400 invalid_field."""
    upper = code.upper()
    if upper not in COUNTRIES:
        raise ApiError(400, "invalid_field", f"{code!r} is not an ISO 3166-1 alpha-2 country code", field)
    return upper
