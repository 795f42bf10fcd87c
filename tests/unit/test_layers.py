"""The layers and the one import name: the contracts of pyproject.toml hold; the layers are the real
subpackages of ``molt_society`` (no link in the tree); nothing imports a bare folder.

The layer order is written once, in ``pyproject.toml`` (``[tool.importlinter]``); import-linter builds the
import graph with grimp, which reads every import statement of a module, function-level ones included.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGE = REPO / "molt_society"


def _layer_names() -> set[str]:
    contract = next(c for c in PYPROJECT["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    return {name.strip() for layer in contract["layers"] for name in layer.split("|")}


def _lint(root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--config", str(config), "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_layer_contracts_hold() -> None:
    done = _lint(REPO, REPO / "pyproject.toml")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


def _subpackages() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_every_subpackage_stands_in_one_layer_and_nothing_is_a_link() -> None:
    assert _layer_names() == _subpackages(), "every package stands in exactly one layer"
    tops = {p.parent.name for p in REPO.glob("*/__init__.py")}
    assert tops == {"molt_society"}, f"code outside the package: {sorted(tops)}"
    tracked = subprocess.run(
        ["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(tracked) > 100
    links = [line.split("\t", 1)[1] for line in tracked if line.startswith("120000 ")]
    assert links == [], "symbolic links in the tree"
    assert not [p for p in PACKAGE.rglob("*") if p.is_symlink()]


def test_the_package_imports_from_any_directory(tmp_path: Path) -> None:
    """Installed, not found through the working directory: ``import molt_society.warehouse`` from elsewhere
    loads this tree's module, once."""
    code = (
        "import sys, molt_society.warehouse as w; print(w.__file__); "
        "print(sum(m.split('.')[0] in ('warehouse', 'schemas') for m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    where, bare = done.stdout.split()
    assert Path(where).resolve() == PACKAGE / "warehouse" / "__init__.py"
    assert bare == "0"


def _bare_imports(path: Path, bare: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names if n.split(".")[0] in bare]
    return found


def test_nothing_imports_a_bare_folder_name() -> None:
    """``import schemas`` would load a second copy of the module beside ``molt_society.schemas``."""
    bare = _layer_names()
    files = [p for d in [PACKAGE, REPO / "tests"] for p in sorted(d.rglob("*.py"))]
    assert len(files) > 100
    found = [hit for p in files for hit in _bare_imports(p, bare)]
    assert found == []


@pytest.mark.parametrize("where", ["module", "function"])
def test_an_upward_import_breaks_the_contract(tmp_path: Path, where: str) -> None:
    """The same kind of contract on a two-layer package: an upward import, even in a function, fails it."""
    pkg = tmp_path / "toy"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    for init in ("__init__.py", "low/__init__.py", "high/__init__.py", "high/top.py"):
        (pkg / init).write_text("")
    body = "from toy.high import top\n" if where == "module" else "def f():\n    from toy.high import top\n"
    (pkg / "low" / "base.py").write_text(body)
    config = tmp_path / "contracts.toml"
    config.write_text(
        textwrap.dedent(
            """
            [tool.importlinter]
            root_package = "toy"
            [[tool.importlinter.contracts]]
            name = "layers"
            type = "layers"
            containers = ["toy"]
            layers = ["high", "low"]
            """
        )
    )
    done = _lint(tmp_path, config)
    assert done.returncode == 1, done.stdout
    assert "toy.low.base -> toy.high.top" in done.stdout
    (pkg / "low" / "base.py").write_text("x = 1\n")
    assert _lint(tmp_path, config).returncode == 0


MAX_FUNCTION_LINES = 80


def test_no_function_over_80_lines_outside_the_benchmarks() -> None:
    """Issue 16: a function longer than a screen is split into named steps (the benchmarks are exempt)."""
    long = []
    for name in sorted(_layer_names() - {"bench"}):
        for path in sorted((PACKAGE / name).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_wheel_installs_one_import_name(tmp_path: Path) -> None:
    """The built distribution puts ``molt_society`` (and its metadata) in site-packages and nothing else,
    with the package data (SQL, the behaviour table, the dashboard's static files) inside it."""
    import shutil
    import zipfile

    src = tmp_path / "src"  # a copy: setuptools writes build/ and *.egg-info next to the sources
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(PACKAGE, src / "molt_society", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("molt_society-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"molt_society", next(t for t in tops if t.endswith(".dist-info"))}
    for data in ("warehouse/tables.sql", "agents/behaviour.toml", "dashboard/static/index.html", "py.typed"):
        assert f"molt_society/{data}" in names
    assert {f"molt_society/{layer}/__init__.py" for layer in _layer_names()} <= set(names)


def test_the_unit_tests_mirror_the_layers() -> None:
    """Every folder of tests/unit is a layer; only the tests of every layer at once stand beside them; no
    two test files share a name (pytest imports them by their name: a second one would shadow the first)."""
    unit = REPO / "tests" / "unit"
    folders = {p.name for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= _layer_names(), f"not layers: {sorted(folders - _layer_names())}"
    assert len(folders) >= 10
    assert {p.name for p in unit.glob("test_*.py")} == {"test_layers.py", "test_event_types.py"}
    names = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert len(names) > 100
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
    modules = {p.stem for p in PACKAGE.rglob("*.py")}
    for test in unit.glob("*/test_*.py"):
        layer = PACKAGE / test.parent.name
        own = {p.stem for p in layer.rglob("*.py")}
        # named for a module, of its own layer when that layer has one of the name
        if test.stem[5:] in modules and test.stem[5:] not in own:
            raise AssertionError(f"{test.relative_to(REPO)} is named for a module of another layer")
