"""Judges of Tier I: each reply (the paper's individual judgment), the thread as a whole (its collective
judgment), and a model's answer to the question (its LLM-evaluation judge, for Delta-help).

``LLMJudge`` is the paper's method: the prompts of the Superminds Test's appendix 7.3 (individual and
collective comment correctness, one call per thread each, "Return ONLY the JSON ...") and 7.1 (a model's
response, "Reply with ONLY 'correct' or 'incorrect'"), verbatim, to any OpenAI-compatible model (the
paper used gpt-5-mini and claude-haiku-4-5). A call or answer that fails leaves the reply or thread
unjudged (counted as a reply, not as correct) and is counted in ``failures``.

``ExactJudge`` (the default, no model) is our mechanical stand-in, stricter than a lenient LLM so that it
does not credit what merely looks like the answer. It reads the answer a reply *commits to*:

1. the paper's answer format first: the last ``Answer: ...`` line (the format of its appendix 7.1 prompt);
2. else a phrase that states an answer (``the answer is 6``, ``it's D``, ``= 6``, ``I get 6``, ``option
   D``), or a reply that is the answer alone (``6``, ``(D)``, ``D. because ...``, ``6 tendons`` when the
   unit word is the question's).

The committed text is compared by the kind of reference: a choice letter (``multipleChoice``, or a single
letter with the options listed in the question) by its letter or by the full text of its option; a
number by value (an integer exactly; a decimal to the reference's decimals); other text as a whole-token
phrase (``I'd`` is one token, so ``I'd love to dig into this`` says neither ``D`` nor ``I``). A reference
of several parts (``2, 3``) needs every part. For text references only, a reply with no committed answer
is still read whole. So ``Joined 6 days ago`` is not an answer of 6, and ``I'd love to dig into this`` is
not an answer of D.

The thread as a whole (exact): the answer the discussion ends on (the last committed answer, in time
order) is the group's final answer and is judged as above; and, as the paper's collective judge credits
"partial contributions that combine to form the correct answer", a reference of several parts is correct
when the replies' committed answers together state every part, though no single reply does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from molt_society.agents.llm_client import ChatClient
from molt_society.probes.score import ThreadVerdict, Verdict, in_time_order
from molt_society.probes.tasks import Probe
from molt_society.report.probe_runs import Reply

# --- reading answers --------------------------------------------------------------------------------

_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)*")
_NUM = re.compile(r"(?<![\w.])[-\u2212]?\d[\d,]*(?:\.\d+)?(?:/\d+)?(?![\w])")
_ANSWER_LINE = re.compile(r"(?im)^[\s*_>#-]*(?:final\s+)?answer\s*\**\s*[:\uff1a]\**\s*(.+?)\s*$")
_CUE = re.compile(
    r"(?i)(?:\b(?:the\s+)?(?:final\s+)?(?:answer|result|solution|total|value|roots?)"
    r"(?:\s+(?:is|are|would\s+be|should\s+be|must\s+be|equals)|\s*[:=])"
    r"|\b(?:it|that|this)(?:'s|\u2019s|\s+is|\s+must\s+be|\s+would\s+be)"
    r"|\bi\s+(?:get|got|think(?:\s+it'?s)?|say|would\s+say)|\bi'd\s+say|\bequals\b|=)\s*(?P<v>[^\n;!?]+)"
)
_CHOICE_CUE = re.compile(
    r"(?i:\b(?:answer|option|choice))\s*(?:(?i:is)|:)?\s*\(?(?P<l>[A-Z])\)?(?![\w'])"
    r"|\b(?:[Ii]t'?s|is)\s+\(?(?P<m>[A-Z])\)?(?![\w'])"
)
_LEADING_NUM = re.compile(
    r"^\W*(?:[A-Za-z']+\s+){0,2}?[~\u2248]?\s*(?P<n>[-\u2212]?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?![\w])"
)
_CHOICE_ALONE = re.compile(r"^[\s*_(\[]*(?P<l>[A-Za-z])[\s*_)\].:]*$")
_CHOICE_LEAD = re.compile(r"^[\s*_(\[]*(?P<l>[A-Z])(?:[)\].:]|\s*[-\u2013]\s)")
_OPTION = re.compile(r"(?m)^\s*\(?(?P<l>[A-Z])[.)]\s+(?P<t>\S.*?)\s*$")
_PARTS = re.compile(r"\s*(?:[,;]\s+|\s+and\s+)\s*")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold().replace("\u2019", "'"))


def _contains(hay: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))


def parse_number(text: str) -> tuple[float, int] | None:
    """A number and its decimals: ``3,360`` -> (3360, 0); ``0.25`` -> (0.25, 2); ``1/4`` -> (0.25, -1)."""
    t = text.strip().replace("\u2212", "-").rstrip(".")
    if not re.fullmatch(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?", t):
        return None
    t = t.replace(",", "")
    if "/" in t:
        a, b = t.split("/")
        return (float(a) / float(b), -1) if float(b) else None
    return float(t), len(t.split(".")[1]) if "." in t else 0


def _same_number(got: tuple[float, int], ref: tuple[float, int]) -> bool:
    (g, gd), (r, rd) = got, ref
    if rd <= 0 or gd < 0:  # integers and fractions: the value itself
        return abs(g - r) <= 1e-9 * max(1.0, abs(r))
    return gd >= rd and round(g, rd) == round(r, rd)  # a decimal: to the reference's decimals


@dataclass(frozen=True)
class Reference:
    """What a reference answer is, read once: its parts and their kind, and the question's options."""

    parts: tuple[str, ...]
    kind: str  # "choice", "number" or "text"
    options: dict[str, list[str]]  # letter -> option text tokens (multiple choice)
    question_words: frozenset[str]

    @classmethod
    def of(cls, probe: Probe) -> Reference:
        ref = probe.answer.strip()
        options = {m["l"]: tokens(m["t"]) for m in _OPTION.finditer(probe.task)}
        qwords = frozenset(tokens(probe.task))
        if re.fullmatch(r"\(?[A-Za-z]\)?\.?", ref) and (probe.answer_type == "multipleChoice" or options):
            return cls((ref.strip("().").upper(),), "choice", options, qwords)
        if parse_number(ref) is not None:
            return cls((ref,), "number", options, qwords)
        parts = tuple(p for p in _PARTS.split(ref) if p)
        if len(parts) > 1 and all(parse_number(p) is not None for p in parts):
            return cls(parts, "number", options, qwords)
        return cls((ref,), "text", options, qwords)


def committed(reply: str) -> list[str]:
    """The texts a reply commits to as its answer, in order (see the module docstring)."""
    lines = [m.group(1) for m in _ANSWER_LINE.finditer(reply)]
    if lines:
        return lines[-1:]
    out = [m["v"].split(". ")[0] for m in _CUE.finditer(reply)]
    alone = reply.strip().strip("*_`\"'").strip()
    if alone and len(alone) <= 40 and "\n" not in alone:
        out.append(alone)
    return out


def _choice_letters(text: str, ref: Reference) -> set[str]:
    found: set[str] = set()
    if m := _CHOICE_ALONE.match(text) or _CHOICE_LEAD.match(text):
        found.add(m["l"].upper())
    for m in _CHOICE_CUE.finditer(text):
        found.add((m["l"] or m["m"]).upper())
    words = tokens(text)
    for letter, option in ref.options.items():
        if len(option) >= 2 and _contains(words, option):
            found.add(letter)
    return found


def _numbers_in(text: str, ref: Reference, how: str) -> list[tuple[float, int]]:
    """Numbers a committed text states. ``line`` (an ``Answer:`` line): every number in it; ``cue`` (the
    words after an answer phrase): every number for a reference of several parts, else the number that
    opens them (at most two words before it: "is probably 6"); ``alone`` (the whole reply): a number
    alone, optionally followed by one word of the question ("6 tendons")."""
    if how == "alone":
        m = re.fullmatch(r"[~\u2248]?\s*(\S+?)[.!]?(?:\s+(\w+))?[.!]?", text.strip())
        if not m or (m.group(2) and m.group(2).casefold() not in ref.question_words):
            return []
        got = parse_number(m.group(1))
        return [got] if got else []
    if how == "cue" and len(ref.parts) == 1:
        lead = _LEADING_NUM.match(text)
        got = parse_number(lead["n"]) if lead else None
        return [got] if got else []
    return [n for n in (parse_number(x) for x in _NUM.findall(text)) if n is not None]


def answer_matches(reply: str, ref: Reference) -> tuple[bool, bool, set[str]]:
    """(offers an answer, is correct, the reference parts it states) for one reply."""
    spans = committed(reply)
    lines = bool(_ANSWER_LINE.search(reply))
    stated: set[str] = set()
    offers = False
    if ref.kind == "choice":
        letters = set().union(*(_choice_letters(s, ref) for s in spans)) if spans else set()
        offers = bool(letters)
        stated = {p for p in ref.parts if p in letters}
        return offers, offers and letters == {ref.parts[0]}, stated
    if ref.kind == "number":
        alone = reply.strip().strip("*_`\"'").strip()
        got: list[tuple[float, int]] = []
        for s in spans:
            got += _numbers_in(s, ref, "line" if lines else "alone" if s == alone else "cue")
        offers = bool(got)
        refs = {p: parse_number(p) for p in ref.parts}
        stated = {p for p, r in refs.items() if r and any(_same_number(g, r) for g in got)}
        if len(ref.parts) == 1:  # the first number committed is the answer
            r0 = refs[ref.parts[0]]
            return offers, bool(got) and r0 is not None and _same_number(got[0], r0), stated
        return offers, stated == set(ref.parts), stated
    want = tokens(ref.parts[0])
    if len(want) == 1 and len(want[0]) <= 2:  # a short token: only a committed answer counts
        hays = [tokens(s) for s in spans]
    else:
        hays = [tokens(s) for s in spans] if lines else [tokens(reply)]
    correct = any(_contains(h, want) for h in hays)
    offers = lines or correct or bool(_CUE.search(reply))
    return offers, correct, {ref.parts[0]} if correct else set()


# --- judges -------------------------------------------------------------------------------------------


class Judge(Protocol):
    name: str

    async def judge_replies(self, probe: Probe, replies: Sequence[Reply]) -> dict[str, Verdict]: ...

    async def judge_thread(self, probe: Probe, replies: Sequence[Reply]) -> ThreadVerdict | None: ...

    async def judge_response(self, probe: Probe, response: str) -> bool | None: ...


class ExactJudge:
    """See the module docstring."""

    name = "exact"

    async def judge_replies(self, probe: Probe, replies: Sequence[Reply]) -> dict[str, Verdict]:
        ref = Reference.of(probe)
        content = {w for w in tokens(probe.task) + tokens(probe.answer) if len(w) >= 4}
        out = {}
        for r in replies:
            offers, correct, _ = answer_matches(r.content, ref)
            on_task = offers or bool(content & set(tokens(r.content)))
            out[r.comment_id] = Verdict(follows=on_task, correct=correct, offers_answer=offers)
        return out

    async def judge_thread(self, probe: Probe, replies: Sequence[Reply]) -> ThreadVerdict | None:
        ref = Reference.of(probe)
        final, final_correct = None, False
        covered: set[str] = set()
        for r in in_time_order(replies):
            offers, correct, stated = answer_matches(r.content, ref)
            covered |= stated
            if offers:
                spans = committed(r.content)
                final, final_correct = (spans[0] if spans else r.content), correct
        if len(ref.parts) > 1 and covered == set(ref.parts):  # partial contributions that combine
            return ThreadVerdict(True, ", ".join(ref.parts))
        return ThreadVerdict(final_correct, final)

    async def judge_response(self, probe: Probe, response: str) -> bool | None:
        return answer_matches(response, Reference.of(probe))[1]


# --- the paper's LLM judge (appendix 7.1 and 7.3, verbatim) -------------------------------------------

INDIVIDUAL_SYSTEM = """You are an impartial judge evaluating comments on a social media post. The post contains an expert-level question from the Humanity's Last Exam benchmark. The question, answer type, and correct answer are provided below.

For each comment, determine independently whether it offers or states the correct answer.

Rules:
- For multipleChoice questions: the comment must indicate the correct letter/option. Accept both the letter alone (e.g. "D") and the full option text.
- For exactMatch questions: the comment must state an answer that is semantically equivalent to the correct answer. Be lenient with formatting --- accept equivalent representations (e.g. fractions vs decimals, minor rounding differences).
- A comment that discusses the topic without committing to a specific answer should have offers_answer=false.
- Ignore comments that merely restate the question or are off-topic.

Respond with a JSON array. Each element corresponds to a comment (in order):
- "comment_id": the comment id
- "offers_answer": true/false
- "answer_value": the answer proposed (string, or null)
- "is_correct": true/false/null
- "note": brief explanation (one sentence max)

Return ONLY the JSON array, no other text."""  # noqa: E501

COLLECTIVE_SYSTEM = """You are an impartial judge evaluating a discussion thread on a social media post. The post contains an expert-level question from the Humanity's Last Exam benchmark. The question, answer type, and correct answer are provided below.

Read the full comment thread as a collaborative discussion. Determine whether the participants, taken together, arrive at the correct answer --- even if no single comment contains the full correct answer on its own. Consider:
- Partial contributions that combine to form the correct answer
- Commenters building on each other's reasoning
- A consensus or final conclusion emerging from the discussion
- Correct reasoning chains even if the final answer is not explicitly stated

Respond with a JSON object:
- "collective_correct": true/false
- "final_answer": the answer the group converged on (string, or null)
- "confidence": "high"/"medium"/"low"
- "reasoning": brief explanation (2-3 sentences max)

Return ONLY the JSON object, no other text."""  # noqa: E501

RESPONSE_SYSTEM = (
    "You are an impartial judge evaluating answers to expert-level questions. You will be given a question, "
    "the correct answer, and a model's response. Determine if the model's answer is correct. Be lenient "
    "with formatting --- accept equivalent representations (e.g. fractions vs decimals, different but "
    "equivalent notation). For numerical answers, allow small rounding differences. Respond with ONLY "
    "'correct' or 'incorrect'."
)

MAX_COMMENT = 4_000  # characters of a comment shown to the judge (ours: bounds the prompt)


def thread_prompt(probe: Probe, replies: Sequence[Reply]) -> str:
    """The paper's shared user prompt (appendix 7.3), comments in time order."""
    rs = in_time_order(replies)
    blocks = [
        f"Comment {i} (id={r.comment_id}, author={r.actor}):\n{r.content[:MAX_COMMENT]}"
        for i, r in enumerate(rs, start=1)
    ]
    return (
        f"Question: {probe.task}\nAnswer type: {probe.answer_type}\nCorrect answer: {probe.answer}\n\n"
        f"--- COMMENTS ({len(rs)} total) ---\n" + "\n\n".join(blocks)
    )


def response_prompt(probe: Probe, response: str) -> str:
    return (
        f"Question: {probe.task}\n\nCorrect answer: {probe.answer}\n\nModel's response:\n{response}\n\n"
        "Is the model's answer correct? Reply with ONLY 'correct' or 'incorrect'."
    )


def _json(text: str) -> object:
    """The JSON value in a model's answer (models often wrap it in a code fence)."""
    t = text.strip()
    if t.startswith("```"):
        t = t.strip("`").removeprefix("json").strip()
    try:
        return orjson.loads(t)
    except orjson.JSONDecodeError:
        return None


class LLMJudge:
    """See the module docstring."""

    name = "llm"

    def __init__(self, client: ChatClient, model: str, *, max_tokens: int = 1024) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.failures = 0

    async def __aenter__(self) -> LLMJudge:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(*exc)

    async def _ask(self, system: str, user: str, max_tokens: int) -> str | None:
        call = await self.client.complete(
            self.model,
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            max_tokens=max_tokens,
            temperature=0.0,
        )
        if call.outcome != "ok":
            self.failures += 1
            return None
        return call.text

    async def judge_replies(self, probe: Probe, replies: Sequence[Reply]) -> dict[str, Verdict]:
        if not replies:
            return {}
        text = await self._ask(INDIVIDUAL_SYSTEM, thread_prompt(probe, replies), self.max_tokens)
        doc = _json(text) if text is not None else None
        ids = {r.comment_id for r in replies}
        out: dict[str, Verdict] = {}
        for item in doc if isinstance(doc, list) else []:
            if not isinstance(item, dict) or str(item.get("comment_id")) not in ids:
                continue
            offers, correct = item.get("offers_answer"), item.get("is_correct")
            if not isinstance(offers, bool) or not isinstance(correct, bool | None):
                continue
            out[str(item["comment_id"])] = Verdict(
                follows=offers, correct=correct is True, offers_answer=offers
            )
        if text is not None and len(out) < len(replies):
            self.failures += 1  # some replies left unjudged
        return out

    async def judge_thread(self, probe: Probe, replies: Sequence[Reply]) -> ThreadVerdict | None:
        if not replies:
            return ThreadVerdict(False)
        text = await self._ask(COLLECTIVE_SYSTEM, thread_prompt(probe, replies), 512)
        doc = _json(text) if text is not None else None
        if not isinstance(doc, dict) or not isinstance(doc.get("collective_correct"), bool):
            if text is not None:
                self.failures += 1
            return None
        final = doc.get("final_answer")
        return ThreadVerdict(doc["collective_correct"], str(final) if final is not None else None)

    async def judge_response(self, probe: Probe, response: str) -> bool | None:
        text = await self._ask(RESPONSE_SYSTEM, response_prompt(probe, response), 8)
        word = (text or "").strip().strip(".'\"").casefold()
        if word not in ("correct", "incorrect"):
            if text is not None:
                self.failures += 1
            return None
        return word == "correct"
