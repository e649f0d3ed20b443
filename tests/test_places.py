"""Country codes and time zones are checked against the real lists, so a typo is refused, not ignored."""

from __future__ import annotations

import pytest

from adslot.errors import ApiError
from adslot.places import COUNTRIES, check_timezone, country_code


def test_every_assigned_iso_3166_alpha_2_code_and_kosovo_are_known() -> None:
    assert len(COUNTRIES) == 250
    assert {"DE", "GB", "US", "JP", "BR", "ZA", "XK"} <= COUNTRIES


@pytest.mark.parametrize(("given", "stored"), [("de", "DE"), ("Gb", "GB"), ("US", "US")])
def test_a_known_country_is_upper_cased(given: str, stored: str) -> None:
    assert country_code(given, "country") == stored


@pytest.mark.parametrize("code", ["UK", "EU", "XX", "ZZ"])
def test_an_unassigned_country_code_is_refused_with_the_field(code: str) -> None:
    with pytest.raises(ApiError) as raised:
        country_code(code, "geo.countries[3]")
    assert (raised.value.status, raised.value.code, raised.value.field) == (
        400,
        "invalid_field",
        "geo.countries[3]",
    )


def test_only_iana_time_zones_pass() -> None:
    check_timezone("America/Argentina/Buenos_Aires")
    for name in ("Europe/Berlinn", "CEST", "../../etc/passwd"):
        with pytest.raises(ApiError) as raised:
            check_timezone(name, "timezone")
        assert (raised.value.status, raised.value.code) == (422, "invalid_timezone")
