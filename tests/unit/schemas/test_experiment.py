"""schemas.experiment: the example spec loads, every invalid spec names its field, society names."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from molt_society.schemas.experiment import (
    BanTopPagerank,
    Behaviour,
    ExperimentSpec,
    FeedPolicy,
    ForkBase,
    Inject,
    ReplayBase,
    SpecError,
    Terms,
    load_spec,
    parse_spec,
    society_name,
)
from molt_society.schemas.society_name import check_society_name

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "experiment.example.toml"


def _example() -> dict[str, Any]:
    with EXAMPLE.open("rb") as f:
        return tomllib.load(f)


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(data, "experiment.toml")
    return str(caught.value).splitlines()


def test_the_example_loads() -> None:
    spec = load_spec(EXAMPLE)
    assert spec.name == "feed-and-moderation"
    assert spec.base == ForkBase(society="demo", at=200)
    assert (spec.ticks, spec.seeds) == (300, [0, 1, 2, 3, 4])
    assert [a.name for a in spec.arms] == ["control", "random-feed", "moderated", "injected"]
    assert spec.control.name == "control"
    assert spec.control.interventions == []
    assert spec.arm("random-feed").interventions == [FeedPolicy(kind="feed_policy", policy="random")]
    ban, terms, feed = spec.arm("moderated").interventions
    assert ban == BanTopPagerank(kind="moderation", rule="ban_top_pagerank", k=10)
    assert terms == Terms(kind="moderation", rule="terms", terms=["airdrop", "free tokens"])
    assert feed == FeedPolicy(kind="feed_policy", policy="personalised", submolts=["general", "ponderings"])
    text, probes, behaviour = spec.arm("injected").interventions
    assert isinstance(text, Inject)
    assert (text.at, text.item, text.submolt, text.new_author, text.author) == (
        10,
        "post",
        "general",
        True,
        None,
    )
    assert text.title == "The moon is made of cheese, scientists confirm"
    assert isinstance(probes, Inject)
    assert (probes.probes, probes.author, probes.title, probes.content) == (3, "agent-0001", None, None)
    assert isinstance(behaviour, Behaviour)
    assert behaviour.overrides() == {"rate_scale": 2.0, "comment_weight": 0.8, "temperature": 1.2}
    assert len(spec.runs()) == 4 * 5


def _set(path: str, value: Any) -> Any:
    """A mutation of the example: set (or, with value ..., delete) the key at a dotted/indexed path."""

    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.replace("[", ".").replace("]", "").split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is ...:
            del node[last]
        else:
            node[last] = value

    return mutate


INVALID = [
    (_set("arms[1].interventions[0].share", 1.5), "arms[1].interventions[0].share: must be in (0, 1]"),
    (_set("arms[1].interventions[0].share", 0), "arms[1].interventions[0].share: must be in (0, 1]"),
    (
        _set("arms[2].interventions[2].share", 0.5),
        "arms[2].interventions[2].share: give submolts or share, not both",
    ),
    (
        _set("arms[1].interventions[0].policy", "viral"),
        "arms[1].interventions[0].policy: Input should be 'hot', 'new', 'top', 'random', 'following' "
        "or 'personalised'",
    ),
    (
        _set("arms[1].interventions[0].kind", "nudge"),
        "arms[1].interventions[0].kind: must be one of feed_policy, moderation, inject, behaviour",
    ),
    (
        _set("arms[1].interventions[0].kind", ...),
        "arms[1].interventions[0].kind: required: one of feed_policy, moderation, inject, behaviour",
    ),
    (
        _set("arms[2].interventions[0].rule", "shadowban"),
        "arms[2].interventions[0].rule: must be one of spam_score, near_duplicates, terms, ban_top_pagerank",
    ),
    (_set("arms[2].interventions[0].k", ...), "arms[2].interventions[0].k: required"),
    (_set("arms[2].interventions[0].k", 0), "arms[2].interventions[0].k: must be >= 1"),
    (_set("arms[2].interventions[0].threshold", 0.5), "arms[2].interventions[0].threshold: unknown field"),
    (_set("arms[2].interventions[1].terms", []), "arms[2].interventions[1].terms: List should have"),
    (_set("arms[2].interventions[1].terms", ["ok", " "]), "arms[2].interventions[1].terms[1]: must not be"),
    (_set("arms[3].interventions[0].at", -1), "arms[3].interventions[0].at: must be >= 0"),
    (_set("arms[3].interventions[0].title", ...), "arms[3].interventions[0].title: required for a post"),
    (_set("arms[3].interventions[0].content", ...), "arms[3].interventions[0].content: required"),
    (
        _set("arms[3].interventions[0].author", "agent-1"),
        "arms[3].interventions[0].author: give author or new_author = true, not both",
    ),
    (
        _set("arms[3].interventions[0].new_author", ...),
        "arms[3].interventions[0].author: required (or new_author = true)",
    ),
    (_set("arms[3].interventions[0].item", "comment"), "arms[3].interventions[0].title: a comment has no"),
    (
        _set("arms[3].interventions[1].title", "t"),
        "arms[3].interventions[1].title: give title and content or",
    ),
    (_set("arms[3].interventions[1].item", "comment"), "arms[3].interventions[1].probes: probe tasks are"),
    (_set("arms[3].interventions[0].reply_to", "p1"), "arms[3].interventions[0].reply_to: only a comment"),
    (_set("arms[3].interventions[2].share", 2), "arms[3].interventions[2].share: must be in (0, 1]"),
    (_set("arms[3].interventions[2].rate_scale", 0.0), "arms[3].interventions[2].rate_scale: must be a"),
    (_set("arms[3].interventions[2].temperature", 2.5), "arms[3].interventions[2].temperature: must be in"),
    (
        _set("arms[3].interventions[2].hot_share", 1.1),
        "arms[3].interventions[2].hot_share: must be in [0, 1]",
    ),
    (_set("arms[3].interventions[2].temperature", "hot"), "arms[3].interventions[2].temperature: Input"),
    (_set("arms[0].control", ...), "arms: exactly one arm must have control = true (found none)"),
    (
        _set("arms[1].control", True),
        "arms: exactly one arm must have control = true (found arms[0], arms[1])",
    ),
    (_set("arms[3].name", "control"), "arms: arm name 'control' is used twice (arms[0] and arms[3])"),
    (_set("arms[1].name", "random.feed"), "arms[1].name: must be 1 to 48 letters"),
    (_set("arms[1].colour", "red"), "arms[1].colour: unknown field"),
    (_set("arms", [{"name": "only", "control": True}]), "arms: give at least 2 arms"),
    (_set("name", "a" * 49), "name: must be 1 to 48 letters"),
    (_set("ticks", 0), "ticks: must be >= 1"),
    (_set("ticks", "300"), "ticks: Input should be a valid integer"),
    (_set("seeds", 1), "seeds: a count of seeds must be in [2, 10000]"),
    (_set("seeds", [7]), "seeds: give at least 2 seeds"),
    (_set("seeds", [1, 2, 1]), "seeds: seed 1 is listed twice"),
    (_set("seeds", [1, -2]), "seeds[1]: a seed must be in [0, 4294967295]"),
    (_set("seeds", "5"), "seeds: must be a count (2 or more) or a list of integers"),
    (_set("base.at", -3), "base.at: a tick must be >= 0"),
    (_set("base.at", "yesterday"), "base.at: must be a tick number or an ISO 8601 time"),
    (_set("base.at", "2026-01-28T00:00:00"), "base.at: must be a tick number or an ISO 8601 time: timestamp"),
    (_set("base.society", "no spaces"), "base.society: invalid society name 'no spaces'"),
    (_set("base.at", ...), "base.at: required"),
    (_set("base.replay", "x.jsonl"), "base: give society and at (to fork a society) or replay"),
    (_set("base", {}), "base: give society and at (to fork a society) or replay"),
    (_set("base", {"replay": ""}), "base.replay: must not be blank"),
]


@pytest.mark.parametrize(("mutate", "expected"), INVALID)
def test_invalid_specs_name_the_field(mutate: Any, expected: str) -> None:
    data = _example()
    mutate(data)
    problems = _problems(data)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"experiment.toml: {expected}")


def test_the_file_name_field_path_and_problem(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace('policy = "random"', 'policy = "random"\nshare = 1.5')
    (tmp_path / "experiment.toml").write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "experiment.toml")
    assert str(caught.value) == "experiment.toml: arms[1].interventions[0].share: must be in (0, 1]"
    assert caught.value.problems == (("arms[1].interventions[0].share", "must be in (0, 1]"),)


def test_every_problem_is_reported() -> None:
    data = _example()
    data["ticks"] = -1
    data["arms"][1]["interventions"][0]["share"] = 0
    assert _problems(data) == [
        "experiment.toml: ticks: must be >= 1",
        "experiment.toml: arms[1].interventions[0].share: must be in (0, 1]",
    ]


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"^missing\.toml: cannot read"):
        load_spec(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("name = \n")
    with pytest.raises(SpecError, match=r"^bad\.toml: not valid TOML"):
        load_spec(tmp_path / "bad.toml")


def test_seeds_count_expands_and_lists_are_kept() -> None:
    data = _example()
    data["seeds"] = 3
    assert parse_spec(data).seeds == [0, 1, 2]
    data["seeds"] = [42, 7]
    assert parse_spec(data).seeds == [42, 7]


def test_base_forms() -> None:
    data = _example()
    data["base"] = {"society": "demo", "at": datetime(2026, 1, 28, 12, tzinfo=UTC)}  # a TOML datetime
    assert parse_spec(data).base == ForkBase(society="demo", at=datetime(2026, 1, 28, 12, tzinfo=UTC))
    data["base"] = {"society": "demo", "at": "2026-01-28T13:00:00+01:00"}
    assert parse_spec(data).base == ForkBase(society="demo", at=datetime(2026, 1, 28, 12, tzinfo=UTC))
    data["base"] = {"replay": "crawl/posts.jsonl"}
    assert parse_spec(data).base == ReplayBase(replay="crawl/posts.jsonl")


def _spec(name: str, arms: list[str], seeds: list[int]) -> ExperimentSpec:
    data = _example()
    data["name"] = name
    data["seeds"] = seeds
    data["arms"] = [{"name": a, "control": i == 0} for i, a in enumerate(arms)]
    return parse_spec(data)


def test_society_names_are_valid_unique_and_deterministic() -> None:
    specs = [
        _spec("exp", ["a", "a-b", "b"], [0, 1, 10]),
        _spec("exp-a", ["b", "x"], [0, 1]),
        _spec("e" * 48, ["A" * 48, "_b"], [0, 2**32 - 1]),
    ]
    names = [society_name(spec, arm, seed) for spec in specs for arm, seed in spec.runs()]
    assert len(names) == len(set(names)) == 3 * 3 + 2 * 2 + 2 * 2
    assert all(check_society_name(n) == n for n in names)
    assert society_name(specs[0], "a-b", 10) == "exp.a-b.s10"
    assert society_name(specs[0], specs[0].arms[1], 10) == society_name(
        _spec("exp", ["a", "a-b"], [0, 10]), "a-b", 10
    )
    with pytest.raises(KeyError):
        society_name(specs[0], "nope", 0)
    with pytest.raises(KeyError):
        society_name(specs[0], "a", 2)


def test_example_society_names() -> None:
    spec = load_spec(EXAMPLE)
    assert parse_spec(_example()) == spec
    assert [society_name(spec, "control", s) for s in spec.seeds][:2] == [
        "feed-and-moderation.control.s0",
        "feed-and-moderation.control.s1",
    ]
