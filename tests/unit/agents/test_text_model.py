"""The word-trigram text model (``agents.text_model``) on a small synthetic corpus built here.

Two submolts with vocabularies of their own (``alpha``: colours, ``beta``: animals) and comments that
answer posts with the words of a theme of their own; some texts carry markdown lists, emoji, links.
"""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest

from molt_society.agents.text_model import (
    MAX_BYTES,
    MAX_WORDS,
    TextModel,
    TextSample,
    bow_cosine,
    text_features,
)

COLOURS = ["crimson", "amber", "teal", "violet", "indigo", "scarlet", "ochre", "cobalt", "jade", "umber"]
ANIMALS = ["otter", "heron", "lynx", "badger", "marten", "falcon", "walrus", "gecko", "bison", "ibex"]
THEMES = [
    ["memory", "context", "window", "token", "prompt"],
    ["shell", "molting", "claw", "crab", "reef"],
    ["garden", "orchard", "harvest", "seedling", "compost"],
    ["orbit", "comet", "nebula", "quasar", "pulsar"],
]
GLUE = ["the", "a", "and", "of", "to", "is", "we", "it"]


def _sentence(rng: random.Random, words: list[str], n: int) -> str:
    return " ".join(rng.choice(words + GLUE) for _ in range(n)) + "."


def _post(rng: random.Random, submolt: str) -> TextSample:
    words = COLOURS if submolt == "alpha" else ANIMALS
    body = " ".join(_sentence(rng, words, rng.randint(4, 12)) for _ in range(rng.randint(1, 6)))
    if rng.random() < 0.3:
        body += "\n\n" + "\n".join(f"- {rng.choice(words)} {rng.choice(words)}" for _ in range(3))
    if rng.random() < 0.2:
        body += " \U0001f99e"
    if rng.random() < 0.1:
        body += " https://example.org/" + rng.choice(words)
    title = f"{rng.choice(words).capitalize()} {rng.choice(words)} {rng.choice(words)}"
    return TextSample("post", body, title=title, submolt=submolt)


def _corpus(seed: int = 7) -> tuple[list[TextSample], list[str]]:
    """300 posts (150 per submolt) and 300 comments, each on its parent's theme; the parents' texts."""
    rng = random.Random(seed)
    samples: list[TextSample] = []
    parents: list[str] = []
    for i in range(300):
        theme = THEMES[i % len(THEMES)]
        parent = _sentence(rng, theme, 20)
        comment = " ".join(_sentence(rng, theme, rng.randint(3, 9)) for _ in range(rng.randint(1, 3)))
        samples.append(_post(rng, "alpha" if i % 2 else "beta"))
        samples.append(TextSample("comment", comment, parent=parent))
        parents.append(parent)
    return samples, parents


@pytest.fixture(scope="module")
def corpus() -> tuple[list[TextSample], list[str]]:
    return _corpus()


@pytest.fixture(scope="module")
def model(corpus: tuple[list[TextSample], list[str]]) -> TextModel:
    return TextModel.fit(corpus[0])


def _draws(model: TextModel, seed: int, n: int, parents: list[str]) -> list[str]:
    py = random.Random(seed)
    out: list[str] = []
    for i in range(n):
        title, body = model.post(py, "alpha" if i % 2 else "beta")
        out += [title, body, model.comment(py, parents[i % len(parents)])]
    return out


def test_same_seed_same_texts_and_other_seed_other_texts(
    model: TextModel, corpus: tuple[list[TextSample], list[str]]
) -> None:
    assert _draws(model, 1, 50, corpus[1]) == _draws(model, 1, 50, corpus[1])
    assert _draws(model, 1, 50, corpus[1]) != _draws(model, 2, 50, corpus[1])


def test_no_generated_text_is_a_training_text(
    model: TextModel, corpus: tuple[list[TextSample], list[str]]
) -> None:
    samples = corpus[0]
    training = {" ".join(t.split()).lower() for s in samples for t in (s.text, s.title) if t}
    drawn = _draws(model, 3, 700, corpus[1])  # 2,100 texts
    assert len(drawn) == 2_100
    copies = [t for t in drawn if " ".join(t.split()).lower() in training]
    assert copies == []


def test_a_tiny_corpus_of_one_phrase_is_never_copied() -> None:
    samples = [TextSample("comment", "hello there friend") for _ in range(20)]
    m = TextModel.fit(samples)
    py = random.Random(0)
    texts = [m.comment(py, "") for _ in range(200)]
    assert all(" ".join(t.split()).lower() != "hello there friend" for t in texts)
    assert all(len(t.split()) in (3, 4) for t in texts)  # the length drawn, or one word more


def test_lengths_follow_the_fitted_distribution(
    model: TextModel, corpus: tuple[list[TextSample], list[str]]
) -> None:
    samples, parents = corpus
    real_comments = [len(s.text.split()) for s in samples if s.kind == "comment"]
    real_posts = [len(s.text.split()) for s in samples if s.kind == "post"]
    py = random.Random(5)
    gen_comments = [len(model.comment(py, parents[i % 300]).split()) for i in range(1500)]
    gen_posts = [len(model.post(py, "alpha")[1].split()) for _ in range(1500)]
    for real, gen in ((real_comments, gen_comments), (real_posts, gen_posts)):
        assert abs(statistics.median(gen) - statistics.median(real)) <= 0.1 * statistics.median(real) + 1
        assert max(gen) <= max(real) + 1  # one appended word at most (a would-be copy)
        assert min(gen) >= min(real)


def test_posts_open_with_their_submolts_words(model: TextModel) -> None:
    py = random.Random(11)
    for submolt, own, other in (("alpha", COLOURS, ANIMALS), ("beta", ANIMALS, COLOURS)):
        for _ in range(100):
            title, body = model.post(py, submolt)
            first_title = title.split()[0].lower()
            first_body = body.split()[0].lower().rstrip(".")
            assert first_title in own, (submolt, title)
            assert first_body in own + GLUE, (submolt, body)
            assert first_body not in other, (submolt, body)


def test_comments_relate_to_their_parents(
    model: TextModel, corpus: tuple[list[TextSample], list[str]]
) -> None:
    parents = corpus[1]
    py = random.Random(13)
    pairs = [(model.comment(py, parents[i]), parents[i]) for i in range(300)]
    own = statistics.mean(bow_cosine(c, p) for c, p in pairs)
    shuffled = statistics.mean(bow_cosine(c, parents[(i + 1) % 300]) for i, (c, _) in enumerate(pairs))
    assert own > shuffled + 0.05
    real = statistics.mean(bow_cosine(s.text, s.parent or "") for s in corpus[0] if s.kind == "comment")
    assert model.stats()["parent_cosine_mean"] == pytest.approx(real)


def test_save_and_load_give_the_same_texts(
    model: TextModel, corpus: tuple[list[TextSample], list[str]], tmp_path: Path
) -> None:
    path = tmp_path / "text-model.npz"
    model.save(path)
    loaded = TextModel.load(path)
    assert _draws(loaded, 17, 100, corpus[1]) == _draws(model, 17, 100, corpus[1])
    assert loaded.stats() == model.stats()


@pytest.mark.parametrize("content", [b"", b"not a model at all", b"PK\x03\x04 broken zip"])
def test_load_of_a_foreign_file_names_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "garbage.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"garbage\.npz"):
        TextModel.load(path)


def test_load_of_a_truncated_model_names_it(model: TextModel, tmp_path: Path) -> None:
    path = tmp_path / "model.npz"
    model.save(path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"model\.npz"):
        TextModel.load(path)


def test_no_text_over_the_caps() -> None:
    rng = random.Random(2)
    wide = [f"w{i:04d}" * 12 for i in range(3000)]  # 60-character words: 1,000 of them are 61,000 bytes
    many = [f"v{i}" for i in range(300)]  # short words: 2,500 of them are far under the byte cap
    samples = [TextSample("comment", " ".join(rng.choice(wide) for _ in range(1000))) for _ in range(6)]
    samples += [
        TextSample("post", " ".join(rng.choice(many) for _ in range(2500)), title="t") for _ in range(6)
    ]
    m = TextModel.fit(samples)
    py = random.Random(4)
    comments = [m.comment(py, "") for _ in range(20)]
    bodies = [m.post(py, "any")[1] for _ in range(20)]
    assert all(len(t.encode("utf-8")) <= MAX_BYTES for t in comments + bodies)
    assert all(len(t.split()) <= MAX_WORDS for t in comments + bodies)
    assert min(len(t.encode("utf-8")) for t in comments) > MAX_BYTES - 400  # the bytes cut these
    assert {len(t.split()) for t in bodies} <= {MAX_WORDS - 1, MAX_WORDS}  # the words cut these


def test_markdown_lists_emoji_and_links_come_back(model: TextModel) -> None:
    py = random.Random(19)
    bodies = [model.post(py, "alpha")[1] for _ in range(400)]
    feats = text_features(bodies)
    assert feats["share_with_list"] > 0.1
    assert feats["share_with_emoji"] > 0.05
    assert any("\n- " in b for b in bodies)
    assert any("https://example.org/" in b for b in bodies)


def test_bow_cosine_by_hand() -> None:
    # "a a b" -> {a: 2, b: 1}; "A c" -> {a: 1, c: 1}: dot 2, norms sqrt(5) and sqrt(2)
    assert bow_cosine("a a b", "A c") == pytest.approx(2 / (5**0.5 * 2**0.5))
    assert bow_cosine("same words", "Same, words!") == pytest.approx(1.0)
    assert bow_cosine("", "anything") == 0.0


def test_text_features_by_hand() -> None:
    texts = [
        "one two three",  # 3 words, nothing
        "- item one\n- item two \U0001f99e",  # 7 words, list, emoji, markdown
        "see https://x.org and `code` here",  # 5 words, link, code
        "# Header\nbody **bold** One",  # 5 words, markdown (header, bold)
    ]
    f = text_features(texts)
    assert f["words_median"] == 5.0
    assert f["words_p90"] == pytest.approx(5 + 0.7 * 2)  # linear interpolation in [3, 5, 5, 7] at 2.7
    assert f["share_with_list"] == 0.25
    assert f["share_with_emoji"] == 0.25
    assert f["share_with_link"] == 0.25
    assert f["share_with_code"] == 0.25
    assert f["share_with_markdown"] == 0.5
    # lowercased vocabulary: {one two three} 3/3, +{-, item, 🦞} 6/10, +{see, https://x.org, and, `code`,
    # here} 11/15, +{#, header, body, **bold**} 15/20 (one: seen)
    points = [(3, 3), (10, 6), (15, 11), (20, 15)]
    assert f["distinct_word_share"] == pytest.approx(15 / 20)

    xs = [math.log(n) for n, _ in points]
    ys = [math.log(d) for _, d in points]
    mx, my = sum(xs) / 4, sum(ys) / 4
    beta = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    assert f["vocab_heaps_beta"] == pytest.approx(beta)
    assert text_features([])["words_median"] == 0.0
