"""The specification of a controlled experiment (the SPEC.toml of ``society experiment``).

An experiment forks one base (a society at a time or tick, or a replayed archive/dump) into arms that
differ by their interventions; every arm runs with every seed for ``ticks`` ticks after the fork, and each
arm x seed is its own society (``society_name``). One arm is the control, against which the effects are
measured (``report.effects``).

Interventions are a tagged union on ``kind``:

- ``feed_policy``: the ranking of the agents' feeds (``policy``), for some ``submolts`` or a ``share`` of
  agents (not both; neither: everyone, everywhere);
- ``moderation``: a ``rule`` with its parameter: ``spam_score`` and ``near_duplicates`` take a
  ``threshold`` in (0, 1] (a score or a similarity), ``terms`` a list of ``terms``, ``ban_top_pagerank``
  the number ``k`` of agents to ban;
- ``inject``: a post or comment (``item``; ``kind`` names the intervention) at tick offset ``at`` in a
  ``submolt``, with ``title``/``content`` or ``probes`` (that many of the existing probe tasks), by
  ``author`` or by a ``new_author``; a comment may name the post it answers (``reply_to``);
- ``behaviour``: for a ``share`` of agents, overrides of the stochastic brain (``rate_scale`` multiplies
  the activity rates; ``post_weight``/``comment_weight``/``vote_weight`` replace the action weights;
  ``hot_share`` and ``reply_prob`` the probabilities of behaviour.toml) or of the LLM brain (``model``,
  ``temperature``).

``load_spec`` reads and checks a file and raises ``SpecError`` whose lines say the file, the field path
and what is wrong (``experiment.toml: arms[1].interventions[0].share: must be in (0, 1]``): a spec is
written by hand and should be fixed in one pass, so every problem is reported, each where it is.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from molt_society.schemas.events import EventTime, Id, Text
from molt_society.schemas.society_name import check_society_name

MAX_SEEDS = 10_000
"""At most this many seeds (a count larger than this is a typo, not an experiment)."""
MAX_SEED = 2**32 - 1
"""Seeds are unsigned 32-bit integers (every generator in the project accepts them)."""
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,47}$")
_EVENT_TIME: TypeAdapter[datetime] = TypeAdapter(EventTime)


def _bad(message: str) -> PydanticCustomError:
    return PydanticCustomError("spec", message)


def _name(value: str) -> str:
    """Experiment and arm names: joined by '.' into society names, so they may not contain one."""
    if not _NAME.fullmatch(value):
        raise _bad("must be 1 to 48 letters, digits, '_' or '-' (no '.'), not starting with '-'")
    return value


def _share(value: float) -> float:
    if not 0 < value <= 1:
        raise _bad("must be in (0, 1]")
    return value


def _positive(value: float) -> float:
    if not value > 0 or value == float("inf"):
        raise _bad("must be a finite number > 0")
    return value


def _probability(value: float) -> float:
    if not 0 <= value <= 1:
        raise _bad("must be in [0, 1]")
    return value


def _temperature(value: float) -> float:
    if not 0 <= value <= 2:
        raise _bad("must be in [0, 2]")
    return value


def _at_least(low: int) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value < low:
            raise _bad(f"must be >= {low}")
        return value

    return check


def _not_blank(value: str) -> str:
    if not value.strip():
        raise _bad("must not be blank")
    return value


def _society(value: str) -> str:
    try:
        return check_society_name(value)
    except ValueError as exc:
        raise _bad(str(exc)) from None


def _fork_point(value: object) -> object:
    """A tick (an integer >= 0) or an ISO 8601 time with a time zone (a TOML datetime or a string)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise _bad("a tick must be >= 0")
        return value
    try:
        return _EVENT_TIME.validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise _bad(f"must be a tick number or an ISO 8601 time: {reason}") from None


Name = Annotated[str, AfterValidator(_name)]
Share = Annotated[float, AfterValidator(_share)]
Positive = Annotated[float, AfterValidator(_positive)]
Probability = Annotated[float, AfterValidator(_probability)]
Temperature = Annotated[float, AfterValidator(_temperature)]
Tick = Annotated[int, AfterValidator(_at_least(0))]
NonBlank = Annotated[Text, AfterValidator(_not_blank)]
ForkPoint = Annotated[datetime | int, BeforeValidator(_fork_point)]


class _Spec(BaseModel):
    # strict: TOML already types its values; a string where a number belongs is a mistake to report
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class FeedPolicy(_Spec):
    """Which ranking the feeds use: for some submolts, a share of agents, or (neither) everyone."""

    kind: Literal["feed_policy"]
    policy: Literal["hot", "new", "top", "random", "following", "personalised"]
    submolts: list[Id] | None = Field(default=None, min_length=1)
    share: Share | None = None

    @field_validator("share")
    @classmethod
    def _scope(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("submolts") is not None:
            raise _bad("give submolts or share, not both")
        return value


class SpamScore(_Spec):
    """Remove posts and comments whose spam score is at least ``threshold``."""

    kind: Literal["moderation"]
    rule: Literal["spam_score"]
    threshold: Share


class NearDuplicates(_Spec):
    """Remove posts and comments at least ``threshold`` similar to an earlier one."""

    kind: Literal["moderation"]
    rule: Literal["near_duplicates"]
    threshold: Share


class Terms(_Spec):
    """Remove posts and comments that contain any of ``terms``."""

    kind: Literal["moderation"]
    rule: Literal["terms"]
    terms: list[NonBlank] = Field(min_length=1)


class BanTopPagerank(_Spec):
    """Ban the ``k`` agents of highest PageRank at the fork; ``remove_content``: also remove their posts and
    comments of the history from the feeds (a suspension that hides what they wrote, not only what they
    would write)."""

    kind: Literal["moderation"]
    rule: Literal["ban_top_pagerank"]
    k: Annotated[int, AfterValidator(_at_least(1))]
    remove_content: bool = False


class Inject(_Spec):
    """A post or comment at tick offset ``at``: given text or existing probe tasks, by an agent or a new one.

    Fields are checked in this order, so each check may look at the ones above it (``info.data``).
    """

    kind: Literal["inject"]
    at: Tick
    item: Literal["post", "comment"]
    submolt: Id
    probes: Annotated[int, AfterValidator(_at_least(1))] | None = Field(default=None, validate_default=True)
    title: NonBlank | None = Field(default=None, validate_default=True)
    content: NonBlank | None = Field(default=None, validate_default=True)
    reply_to: Id | None = Field(default=None, validate_default=True)
    new_author: bool = False
    author: Id | None = Field(default=None, validate_default=True)

    @field_validator("probes")
    @classmethod
    def _probes_are_posts(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("item") == "comment":
            raise _bad('probe tasks are posts: use item = "post"')
        return value

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None, info: ValidationInfo) -> str | None:
        item, probes = info.data.get("item"), info.data.get("probes")
        if value is not None and item == "comment":
            raise _bad("a comment has no title")
        if value is not None and probes is not None:
            raise _bad("give title and content or probes, not both")
        if value is None and item == "post" and probes is None and "probes" in info.data:
            raise _bad("required for a post (or give probes)")
        return value

    @field_validator("content")
    @classmethod
    def _content(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("probes") is not None:
            raise _bad("give title and content or probes, not both")
        if value is None and info.data.get("probes") is None and "probes" in info.data:
            raise _bad("required (or give probes)")
        return value

    @field_validator("reply_to")
    @classmethod
    def _reply_to(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("item") == "post":
            raise _bad("only a comment replies to a post")
        return value

    @field_validator("author")
    @classmethod
    def _author(cls, value: str | None, info: ValidationInfo) -> str | None:
        new = info.data.get("new_author")
        if value is not None and new:
            raise _bad("give author or new_author = true, not both")
        if value is None and new is False:
            raise _bad("required (or new_author = true)")
        return value


BRAIN_OVERRIDES = (
    "rate_scale",
    "post_weight",
    "comment_weight",
    "vote_weight",
    "hot_share",
    "reply_prob",
    "model",
    "temperature",
)
"""The parameters a ``behaviour`` intervention may override; it must give at least one."""


class Behaviour(_Spec):
    """Overrides of the stochastic brain's or the LLM brain's parameters for a share of the agents."""

    kind: Literal["behaviour"]
    share: Share
    rate_scale: Positive | None = None
    post_weight: Positive | None = None
    comment_weight: Positive | None = None
    vote_weight: Positive | None = None
    hot_share: Probability | None = None
    reply_prob: Probability | None = None
    model: NonBlank | None = None
    temperature: Temperature | None = None

    @model_validator(mode="after")
    def _some_override(self) -> Behaviour:
        if all(getattr(self, name) is None for name in BRAIN_OVERRIDES):
            raise _bad(f"give at least one override: {', '.join(BRAIN_OVERRIDES)}")
        return self

    def overrides(self) -> dict[str, float | str]:
        """The parameters this intervention sets, by name."""
        return {n: v for n in BRAIN_OVERRIDES if (v := getattr(self, n)) is not None}


def _tag(key: str) -> Callable[[Any], str | None]:
    """A discriminator on ``key``: the tag ``<value>`` (tags are stripped from error paths, see _where)."""

    def tag(value: Any) -> str | None:
        found = value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)
        return f"<{found}>" if isinstance(found, str) else None

    return tag


MODERATION_RULES = ("spam_score", "near_duplicates", "terms", "ban_top_pagerank")
INTERVENTION_KINDS = ("feed_policy", "moderation", "inject", "behaviour")

Moderation = Annotated[
    Annotated[SpamScore, Tag("<spam_score>")]
    | Annotated[NearDuplicates, Tag("<near_duplicates>")]
    | Annotated[Terms, Tag("<terms>")]
    | Annotated[BanTopPagerank, Tag("<ban_top_pagerank>")],
    Discriminator(
        _tag("rule"),
        custom_error_type="bad_rule",
        custom_error_message=f"must be one of {', '.join(MODERATION_RULES)}",
    ),
]
Intervention = Annotated[
    Annotated[FeedPolicy, Tag("<feed_policy>")]
    | Annotated[Moderation, Tag("<moderation>")]
    | Annotated[Inject, Tag("<inject>")]
    | Annotated[Behaviour, Tag("<behaviour>")],
    Discriminator(
        _tag("kind"),
        custom_error_type="bad_kind",
        custom_error_message=f"must be one of {', '.join(INTERVENTION_KINDS)}",
    ),
]


class Arm(_Spec):
    """One arm: a name, its interventions (none for a plain control), and whether it is the control."""

    name: Name
    control: bool = False
    description: Text = ""
    interventions: list[Intervention] = Field(default_factory=list)


class ForkBase(_Spec):
    """Fork the society ``society`` at ``at``: a tick number or an ISO 8601 time with a time zone."""

    society: Annotated[str, AfterValidator(_society)]
    at: ForkPoint


class ReplayBase(_Spec):
    """Start from a replay of the archive or dump at ``replay`` (a path, as written in the spec)."""

    replay: NonBlank


def _base_tag(value: Any) -> str | None:
    keys = set(value) if isinstance(value, Mapping) else set(type(value).model_fields)
    if "replay" in keys:
        return "<replay>" if not keys & {"society", "at"} else "<both>"
    return "<fork>" if keys & {"society", "at"} else None


Base = Annotated[
    Annotated[ForkBase, Tag("<fork>")] | Annotated[ReplayBase, Tag("<replay>")],
    Discriminator(
        _base_tag,
        custom_error_type="bad_base",
        custom_error_message="give society and at (to fork a society) or replay (an archive or dump), "
        "one of the two",
    ),
]


def _expand_seeds(value: object) -> object:
    """A count ``n`` of seeds means the seeds 0 .. n-1."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 2 <= value <= MAX_SEEDS:
            raise _bad(f"a count of seeds must be in [2, {MAX_SEEDS}] (confidence intervals need 2)")
        return list(range(value))
    if not isinstance(value, list):
        raise _bad("must be a count (2 or more) or a list of integers")
    return value


def _seed_list(value: list[int]) -> list[int]:
    if len(value) < 2:
        raise _bad("give at least 2 seeds (confidence intervals need 2)")
    if len(value) > MAX_SEEDS:
        raise _bad(f"at most {MAX_SEEDS} seeds")
    seen: set[int] = set()
    for seed in value:
        if seed in seen:
            raise _bad(f"seed {seed} is listed twice")
        seen.add(seed)
    return value


def _seed(value: int) -> int:
    if not 0 <= value <= MAX_SEED:
        raise _bad(f"a seed must be in [0, {MAX_SEED}]")
    return value


Seeds = Annotated[
    list[Annotated[int, AfterValidator(_seed)]],
    BeforeValidator(_expand_seeds),
    AfterValidator(_seed_list),
]


class ExperimentSpec(_Spec):
    """An experiment: a base, arms (exactly one the control), seeds, and the length after the fork."""

    name: Name
    description: Text = ""
    base: Base
    ticks: Annotated[int, AfterValidator(_at_least(1))]
    seeds: Seeds
    common_seeds: bool = True
    """Every arm runs with the same seeds (common random numbers: arm x seed s draws the same random streams
    as the control's seed s until the intervention makes them diverge). False: each arm draws its own
    seeds (``run_seed``), independent replications (what an A/A experiment needs to show noise)."""
    arms: list[Arm]

    @field_validator("arms")
    @classmethod
    def _arms(cls, arms: list[Arm]) -> list[Arm]:
        if len(arms) < 2:
            raise _bad("give at least 2 arms (a control and a treatment)")
        names = [a.name for a in arms]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise _bad(f"arm name {name!r} is used twice (arms[{names.index(name)}] and arms[{i}])")
        controls = [f"arms[{i}]" for i, a in enumerate(arms) if a.control]
        if len(controls) != 1:
            found = ", ".join(controls) or "none"
            raise _bad(f"exactly one arm must have control = true (found {found})")
        return arms

    @property
    def control(self) -> Arm:
        """The control arm."""
        return next(a for a in self.arms if a.control)

    def arm(self, name: str) -> Arm:
        """The arm called ``name`` (``KeyError`` when there is none)."""
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(f"experiment {self.name!r} has no arm {name!r}")

    def runs(self) -> list[tuple[str, int]]:
        """Every (arm, seed) pair, arms in the spec's order, seeds in the spec's order."""
        return [(a.name, s) for a in self.arms for s in self.seeds]


def run_seed(spec: ExperimentSpec, arm: str | Arm, seed: int) -> int:
    """The simulation seed of arm x ``seed``: ``seed`` itself with ``common_seeds``; otherwise a seed drawn
    from (arm name, seed) by a stable hash (blake2b), in [0, 2**32)."""
    name = arm.name if isinstance(arm, Arm) else arm
    if spec.common_seeds:
        return seed
    digest = hashlib.blake2b(f"{name}\x00{seed}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")


def society_name(spec: ExperimentSpec, arm: str | Arm, seed: int) -> str:
    """The society of one arm x seed: ``<experiment>.<arm>.s<seed>``.

    Deterministic, and unique per (experiment, arm, seed): experiment and arm names contain no '.', so the
    three parts are read back unambiguously. At most 48 + 1 + 48 + 2 + 10 characters, which
    ``check_society_name`` allows.
    """
    name = arm.name if isinstance(arm, Arm) else arm
    spec.arm(name)
    if seed not in spec.seeds:
        raise KeyError(f"experiment {spec.name!r} has no seed {seed}")
    return check_society_name(f"{spec.name}.{name}.s{seed}")


class SpecError(ValueError):
    """A spec that cannot be used: ``problems`` are (field path, what is wrong), ``source`` the file."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(
            "\n".join(
                f"{source}: {where}: {what}" if where else f"{source}: {what}" for where, what in problems
            )
        )


_DISCRIMINATED = {"bad_kind": "kind", "bad_rule": "rule"}


def _where(error: ErrorDetails) -> str:
    """``arms[1].interventions[0].share``: the error's location without the union tags (``<inject>``)."""
    loc = [p for p in error["loc"] if not (isinstance(p, str) and p.startswith("<") and p.endswith(">"))]
    if error["type"] in _DISCRIMINATED:
        loc.append(_DISCRIMINATED[error["type"]])
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _what(error: ErrorDetails) -> str:
    key = _DISCRIMINATED.get(error["type"])
    if key is not None and isinstance(error["input"], Mapping) and key not in error["input"]:
        return f"required: {error['msg'].removeprefix('must be ')}"
    if error["type"] == "missing":
        return "required"
    if error["type"] == "extra_forbidden":
        return "unknown field"
    return error["msg"].removeprefix("Value error, ")


def parse_spec(data: Mapping[str, Any], source: str = "<spec>") -> ExperimentSpec:
    """The experiment described by ``data`` (a parsed TOML document); ``SpecError`` naming ``source``."""
    try:
        return ExperimentSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise SpecError(source, [(_where(e), _what(e)) for e in exc.errors()]) from None


def load_spec(path: str | Path) -> ExperimentSpec:
    """The experiment in the TOML file ``path``; ``SpecError`` (file, field path, problem) otherwise."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(path.name, [("", f"cannot read: {exc.strerror or exc}")]) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(path.name, [("", f"not valid TOML: {exc}")]) from None
    return parse_spec(data, path.name)
