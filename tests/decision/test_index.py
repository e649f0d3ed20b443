"""The compiled decision index: which campaigns are candidates for a venue."""

from __future__ import annotations

from adslot.decision.index import DecisionIndex
from tests.decision.factories import campaign


def test_candidates_of_a_venue_are_its_targeted_campaigns_then_all_venue_campaigns() -> None:
    targeted = campaign(1, venues=("v1",))
    everywhere = campaign(2, all_venues=True)
    other = campaign(3, venues=("v2",))
    index = DecisionIndex.build([targeted, everywhere, other])
    assert index.candidates("v1") == (targeted, everywhere)
    assert index.candidates("v2") == (other, everywhere)
    assert index.candidates("unknown") == (everywhere,)


def test_candidates_of_an_untargeted_venue_without_all_venue_campaigns_are_empty() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1",))])
    assert index.candidates("v2") == ()


def test_all_venue_campaign_that_also_lists_venues_is_a_candidate_once() -> None:
    both = campaign(1, all_venues=True, venues=("v1",))
    index = DecisionIndex.build([both])
    assert index.candidates("v1") == (both,)
    assert index.candidates("v2") == (both,)


def test_campaign_without_creatives_is_left_out_of_the_index() -> None:
    index = DecisionIndex.build(
        [campaign(1, venues=("v1",), creatives=0), campaign(2, all_venues=True, creatives=0)]
    )
    assert index.by_venue == {}
    assert index.everywhere == ()


def test_campaign_targeting_several_venues_is_a_candidate_in_each_and_nowhere_else() -> None:
    multi = campaign(1, venues=("v1", "v2", "v3"))
    index = DecisionIndex.build([multi])
    assert index.by_venue == {"v1": (multi,), "v2": (multi,), "v3": (multi,)}
    assert index.everywhere == ()
    assert index.candidates("v4") == ()


def test_candidates_keep_the_order_campaigns_were_given_in() -> None:
    given = [campaign(n, venues=("v1",)) for n in (5, 3, 9)] + [campaign(n, all_venues=True) for n in (8, 2)]
    index = DecisionIndex.build(given)
    assert [c.id for c in index.candidates("v1")] == [5, 3, 9, 8, 2]
