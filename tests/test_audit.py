"""The audit log's entries read as what changed."""

from __future__ import annotations

from adslot.audit import Change, Entry


def entry(before: str | None, after: str | None) -> Entry:
    return Entry(1, 0, "a@example.com", "venue.update", "venue v", before, after)


def test_an_update_shows_only_the_fields_that_changed() -> None:
    changed = entry(
        '{"name":"Old","city":"Berlin","created_at":1}', '{"name":"New","city":"Berlin","created_at":1}'
    )
    assert changed.changes() == [Change("name", '"Old"', '"New"')]


def test_a_creation_shows_every_field_it_set() -> None:
    made = entry(None, '{"name":"New","tags":["a"],"city":null}')
    assert made.changes() == [Change("name", "", '"New"'), Change("tags", "", '["a"]')]


def test_a_value_that_is_not_an_object_is_shown_whole() -> None:
    assert entry(None, "true").changes() == [Change("", "", "true")]
