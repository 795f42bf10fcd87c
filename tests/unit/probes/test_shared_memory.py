"""The shared-memory probe's three types and their scoring against a hand-made record, counted by hand."""

from __future__ import annotations

import pytest

from molt_society.probes import tasks
from molt_society.probes.score import Reply
from molt_society.probes.shared_memory import KINDS, Record, references, score_kind
from molt_society.probes.tasks import shared_memory as probes

RECORD = Record(
    agents={"a1": "a1", "molty_1": "a1", "a2": "a2", "molty_2": "a2", "molty_probe": "pr"},
    posts={"p1": "p1", "p2": "p2", "p3": "p3"},
    titles={"memory is a river of tokens": "p1", "notes on context windows": "p2"},
    submolts={"general": "general", "philosophy": "philosophy"},
    top={"reads": ["p1", "p3"], "accounts": ["a2"], "background": ["general", "philosophy"]},
)


def _r(cid: str, text: str) -> Reply:
    return Reply(cid, None, "someone", 1, text)


def test_three_types_each_posted_n_times() -> None:
    made = probes(2)
    assert [p.meta["kind"] for p in made] == list(KINDS) * 2
    assert all(p.tier == "memory" and len(p.title) <= 280 and len(p.content) <= 280 for p in made)
    assert len({(p.title, p.content) for p in made}) == 6  # the second round uses other wordings
    # the CLI's entry point gives the three types too (it used to post "who is influential" only)
    assert sorted(str(p.meta.get("kind")) for p in tasks.shared_memory(1)) == sorted(KINDS)


def test_references_read_posts_agents_communities_and_unknown_handles() -> None:
    refs = references(
        'Read "Memory is a River of Tokens" (/post/p2) and /post/p404 by @molty_1; ask u/ghost in m/general '
        "or m/atlantis, or MOLTY_2 or molty_probe",
        RECORD,
        exclude={"pr"},
    )
    assert refs.posts == {"p1", "p2"}  # the title, the link
    assert refs.agents == {"a1", "a2"}  # @molty_1, MOLTY_2; the probing agent is left out
    assert refs.submolts == {"general"}
    # explicit: @molty_1, u/ghost, m/general, m/atlantis, /post/p2, /post/p404; unknown: ghost, atlantis, p404
    assert (refs.explicit, refs.unknown) == (6, 3)
    assert references("Hello everyone, nothing to name here.", RECORD).explicit == 0


def test_each_type_scored_against_its_own_part_of_the_record() -> None:
    reads = score_kind(
        "reads",
        2,
        [
            _r("c1", "You must read 'Memory is a river of tokens' and /post/p999"),
            _r("c2", "https://moltbook.com/post/p2 is great"),
            _r("c3", "I love everything here"),
        ],
        RECORD,
    )
    assert (reads.probes, reads.replies, reads.referencing) == (2, 3, 2)
    assert (reads.explicit_refs, reads.unknown_refs, reads.unknown_share) == (2, 1, 0.5)
    assert reads.agreement == 0.0  # {p1} vs {p2}
    assert reads.named == {"p1": 1, "p2": 1}
    assert reads.precision == pytest.approx(1 / 2)  # p1 of {p1, p2} is a top post
    assert reads.recall == pytest.approx(1 / 2)  # p1 of the top {p1, p3}

    accounts = score_kind(
        "accounts",
        1,
        [
            _r("c1", "@ghostwriter and molty_1 obviously"),
            _r("c2", "u/molty_2, Molty_1"),
            _r("c3", "molty_probe"),
        ],
        RECORD,
        exclude={"pr"},
    )
    assert (accounts.replies, accounts.referencing) == (3, 2)
    assert (accounts.explicit_refs, accounts.unknown_refs) == (2, 1)  # @ghostwriter names nobody
    assert accounts.agreement == pytest.approx(1 / 2)  # {a1} vs {a1, a2}
    assert accounts.named == {"a1": 2, "a2": 1}
    assert accounts.precision == pytest.approx(1 / 2)
    assert accounts.recall == 1.0

    background = score_kind(
        "background", 1, [_r("c1", "It started in m/general, then m/philosophy and m/atlantis")], RECORD
    )
    assert background.named == {"general": 1, "philosophy": 1}
    assert (background.explicit_refs, background.unknown_refs) == (3, 1)
    assert background.agreement is None  # one reply: nothing to agree with
    assert (background.precision, background.recall) == (1.0, 1.0)

    empty = score_kind("reads", 1, [], RECORD)
    assert (empty.replies, empty.unknown_share, empty.precision, empty.agreement) == (0, None, None, None)
