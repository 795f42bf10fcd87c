"""Where the running local stack says who it is: ``<state_dir>/stack.json``.

``society.stack.LocalStack`` writes the file (the driver's pid, the broker's and every child's, the
bootstrap address, the local model server's URL); anything that needs the running stack's broker or
model server (the CLI, ``report.superminds``' judge) reads it here, without importing the stack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from molt_society.runtime.settings import WhereSettings


def state_path(settings: WhereSettings) -> Path:
    """``<state_dir>/stack.json``: the running stack's state file."""
    return settings.state_dir / "stack.json"


def read_state(settings: WhereSettings) -> dict[str, Any]:
    """The running stack's ``<state_dir>/stack.json`` (see ``LocalStack.write_state``); {} without one."""
    try:
        state = json.loads(state_path(settings).read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def model_server_url(settings: WhereSettings) -> str | None:
    """The URL of the running stack's local model server, if it has one."""
    url = (read_state(settings).get("model_server") or {}).get("url")
    return str(url) if url else None
