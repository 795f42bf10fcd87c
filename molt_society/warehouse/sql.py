"""Values the access layer puts into SQL text.

The society name is the only value the report and the dashboard ever place into a query's text: it is
checked first (``schemas.society_name``: letters, digits, ``_``, ``.``, ``-``), so it cannot close the
string literal. Agent-written text only ever travels as data in results.
"""

from __future__ import annotations

from molt_society.schemas.society_name import check_society_name


def quoted(society: str) -> str:
    """The society name as an SQL string literal, after validation (the only name ever put in SQL)."""
    return "'" + check_society_name(society) + "'"
