"""The README, run as a new user would (issue 29): on a copy of the clone, ``make demo``, then every ``sh``
and ``python`` block of README.md in order, as written; every ``toml`` block through the experiment spec's
checker; docs/notebook.ipynb with a Jupyter kernel.

The copy holds what ``git ls-files`` lists (committed or not, ignored files left out) beside a link to the
project's ``.venv`` and to ``../shared`` (the README's data). Commands get a new user's environment: no
``SOCIETY_*``, ``CLICKHOUSE_*`` or ``KAFKA_BOOTSTRAP`` but the documented knobs that shorten the long
blocks (``KNOBS``; README, "The README test"). A block that exits non-zero fails with its text and the tail
of its output. Blocks in other languages (the diagram, an error message quoted) are text, not commands.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from molt_society.schemas.experiment import load_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # make demo: 5-10 minutes

REPO = Path(__file__).resolve().parents[2]
KNOBS = {
    "SOCIETY_FIT_SAMPLE": "0.01",
    "SOCIETY_EXPERIMENT_MAX_SEEDS": "2",
    "SOCIETY_EXPERIMENT_MAX_TICKS": "30",
}
"""The documented knobs that shorten the long blocks (never skipped)."""
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
RUN = ("sh", "bash", "python")
BLOCK_TIMEOUT_S = 1500


def blocks(path: Path) -> list[tuple[str, str, int]]:
    """The fenced blocks of a Markdown file: (language, text, line of the fence)."""
    text = path.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def test_the_fence_reader_finds_every_block() -> None:
    """An independent count: fences come in pairs, and each pair is one block."""
    fences = [ln for ln in (REPO / "README.md").read_text().splitlines() if ln.startswith("```")]
    assert len(fences) % 2 == 0
    found = blocks(REPO / "README.md")
    assert len(found) == len(fences) // 2
    assert {lang for lang, _, _ in found} >= {"sh", "python", "toml"}


def _user_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOCIETY_", "CLICKHOUSE_", "PYTEST_"))
        and k not in ("KAFKA_BOOTSTRAP", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    }
    return env | KNOBS


def _copy_clone(dest: Path) -> Path:
    clone = dest / "clone"
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree
        target = clone / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    (clone / ".venv").symlink_to(REPO / ".venv")
    (dest / "shared").symlink_to(REPO.parent / "shared")
    return clone


def _run(clone: Path, argv: list[str], what: str) -> str:
    done = subprocess.run(
        argv,
        cwd=clone,
        env=_user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    if done.returncode != 0:
        pytest.fail(f"{what} exited {done.returncode}; the last of its output:\n{done.stdout[-6000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    stamp, pyproject = REPO / ".venv" / ".installed", REPO / "pyproject.toml"
    if not stamp.exists() or stamp.stat().st_mtime < pyproject.stat().st_mtime:
        pytest.fail("the .venv is older than pyproject.toml: run `make setup` first (make test does)")
    return _copy_clone(tmp_path_factory.mktemp("readme"))


README_BLOCKS = [b for b in blocks(REPO / "README.md") if b[0] in (*RUN, "toml")]


@pytest.mark.parametrize(
    ("lang", "text", "line"), README_BLOCKS, ids=[f"README.md:{b[2]}" for b in README_BLOCKS]
)
def test_each_block_of_the_readme_works_as_written(clone: Path, lang: str, text: str, line: int) -> None:
    what = f"the {lang} block at README.md:{line}:\n{text}"
    if lang == "toml":
        spec = clone / f"readme-{line}.toml"
        spec.write_text(text)
        load_spec(spec)  # raises SpecError naming the field of any mistake
    elif lang == "python":
        _run(clone, [str(clone / ".venv" / "bin" / "python"), "-c", text], what)
    else:
        _run(clone, ["bash", "-e", "-o", "pipefail", "-c", text], what)


def test_the_example_experiment_counted_the_bans(clone: Path) -> None:
    """After the first hour's ``society experiment docs/experiment.example.toml`` (its quick look): the
    result exists and shows the moderated arm's 10 bans, which happen at the fork tick (issue 29)."""
    result = clone / ".society" / "experiments" / "feed-and-moderation" / "result.json"
    doc = json.loads(result.read_text())
    banned = next(m for m in doc["metrics"] if m["key"] == "banned")
    arms = {a["arm"]: a for a in banned["arms"]}
    assert arms["moderated"]["mean"] > 0, banned
    assert arms["control"]["mean"] == 0, banned
    assert (clone / ".society" / "experiments" / "feed-and-moderation" / "result.html").exists()


def test_the_example_notebook_executes_and_draws_its_figures(clone: Path) -> None:
    """docs/notebook.ipynb on the store ``make demo`` filled, run from docs/ as Jupyter would."""
    import nbformat
    from nbclient import NotebookClient

    path = clone / "docs" / "notebook.ipynb"
    nb = nbformat.read(path, as_version=4)
    env_before = dict(os.environ)
    os.environ.clear()
    os.environ.update(_user_env())  # the kernel inherits it: no test setting may point it elsewhere
    try:
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # events per hour, PageRank share, thread depth
