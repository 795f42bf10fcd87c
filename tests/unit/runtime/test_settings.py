"""``runtime.settings``: one ``Settings`` made of one group per role, each field in exactly one group, every
variable still ``SOCIETY_<FIELD>`` (or the external name it always had), and the README's table of them
grouped as the code groups them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from molt_society.runtime import settings as settings_module
from molt_society.runtime.settings import Settings
from molt_society.society.stack import settings_env

REPO = Path(__file__).resolve().parents[3]
GROUPS = [
    cls
    for cls in vars(settings_module).values()
    if isinstance(cls, type)
    and issubclass(cls, settings_module._Group)
    and cls not in (Settings, settings_module._Group)
]
EXTERNAL = {
    "kafka_bootstrap": "KAFKA_BOOTSTRAP",
    "clickhouse_url": "CLICKHOUSE_URL",
    "clickhouse_reader_url": "CLICKHOUSE_READER_URL",
}


def _own_fields(cls: type) -> set[str]:
    """The fields a group declares itself (not inherited: every group stands on ``_Group`` alone)."""
    return set(cls.__annotations__)


def test_every_field_stands_in_exactly_one_group_and_settings_is_all_of_them() -> None:
    assert len(GROUPS) >= 8
    owners: dict[str, list[str]] = {}
    for group in GROUPS:
        assert group.__bases__ == (settings_module._Group,), f"{group.__name__} stands on another group"
        for name in _own_fields(group):
            owners.setdefault(name, []).append(group.__name__)
    assert {name: groups for name, groups in owners.items() if len(groups) > 1} == {}
    assert set(owners) == set(Settings.model_fields)
    assert set(Settings.__bases__) == set(GROUPS)


def _changed(name: str, info: Any) -> Any:
    """A valid value of field ``name`` other than its default."""
    special = {
        "kafka_bootstrap": "broker-a:9092",
        "clickhouse_url": "chdb:///tmp/elsewhere",
        "clickhouse_reader_url": "http://reader:pw@host:8123/db",
        "broker": "tansu",
        "mode": "realtime",
        "sim_start": "2026-02-01T00:00:00+00:00",
        "report_embeddings_runtime": "onnx",
        "log_level": "debug",
        "llm_models": "a,b",
        "allowed_hosts": "example.org",
        "society": "other",
        "dashboard_host": "127.0.0.2",
        "llm_base_url": "http://127.0.0.1:1/v1",
        "llm_api_key": "k",
        "behaviour_file": Path("/tmp/behaviour.toml"),
        "arm_plan": Path("/tmp/arm.json"),
        "llm_model_path": Path("/tmp/model.gguf"),
        "state_dir": Path("/tmp/state"),
        "fit_sample": 0.5,
        "llm_rate": 0.25,
        "llm_temperature": 1.1,
        "resume_us": 123,
        "experiment_max_seeds": 3,
        "experiment_max_ticks": 7,
        "llm_server_threads": 3,
    }
    if name in special:
        return special[name]
    default = info.default
    if isinstance(default, bool):
        return not default
    if default is None:
        return True
    if isinstance(default, int):
        return default + 1 if name != "replication" else 2
    if isinstance(default, float):
        return default + 1.5
    raise AssertionError(f"no changed value for {name}")


def test_every_variable_keeps_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each field is read from ``SOCIETY_<FIELD>`` (or its external name), whatever group holds it."""
    for name, info in Settings.model_fields.items():
        value = _changed(name, info)
        var = EXTERNAL.get(name, f"SOCIETY_{name.upper()}")
        monkeypatch.setenv(var, str(value).lower() if isinstance(value, bool) else str(value))
        read = getattr(Settings(), name)
        assert read == value, f"{var}={value!r} read as {read!r}"
        assert read != info.get_default(call_default_factory=True), name
        monkeypatch.delenv(var)


def test_a_child_reads_back_every_setting_its_parent_hands_it(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = Settings(**{n: _changed(n, i) for n, i in Settings.model_fields.items()})
    env = settings_env(changed)
    for key in list(env):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        if key.startswith("SOCIETY_") or key in EXTERNAL.values():
            monkeypatch.setenv(key, value)
    assert Settings() == changed


def test_the_readme_groups_the_variables_as_the_code_does() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("\n## Settings\n") : readme.index("## The record is read-only from outside")]
    group_of = {name: g.__name__ for g in GROUPS for name in _own_fields(g)}
    var_to_field = {EXTERNAL.get(n, f"SOCIETY_{n.upper()}"): n for n in Settings.model_fields}
    current = None
    checked = 0
    for line in table.splitlines():
        if heading := re.match(r"\| \*\*`(\w+)`", line):
            current = heading.group(1)
            continue
        if not line.startswith("| `"):
            continue
        first = re.match(r"\| `(\w+)`", line)
        assert first is not None
        assert current is not None
        field = var_to_field[first.group(1)]
        assert group_of[field] == current, f"{first.group(1)} is under {current}, not {group_of[field]}"
        checked += 1
    assert checked >= 30
