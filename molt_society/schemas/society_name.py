"""What a society may be called: a fragment of its topic names (``society.<name>.<role>``).

Checked wherever a name enters from outside (the CLI, the dashboard), and before the name is put into
SQL (``warehouse.sql.quoted``): the only value the report and the dashboard ever substitute into a query.
"""

from __future__ import annotations

import re

SOCIETY_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,120}$")


class BadSocietyName(ValueError):
    """The society name is not a valid topic-name fragment."""


def check_society_name(name: str) -> str:
    """``name`` itself when it is a valid society name; ``BadSocietyName`` otherwise."""
    if not SOCIETY_NAME.fullmatch(name):
        raise BadSocietyName(
            f"invalid society name {name!r}: use letters, digits, '_', '.' and '-' (at most 121 characters)"
        )
    return name
