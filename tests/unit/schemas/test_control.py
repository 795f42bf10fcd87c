"""``schemas.control.metric_id`` (RFC 4122 version 5 by hand, for speed) equals the standard library's
``uuid.uuid5`` on the same namespace and name, for any society, metric, window and dimension."""

from __future__ import annotations

import random
import uuid

from molt_society.schemas.control import _METRIC_NS, metric_id


def test_metric_id_is_the_standard_librarys_uuid5() -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ019_-.|: éß中文🦞\u200b"
    cases = [("s", "active_agents", 0, ""), ("society-1", "thread_depth", 2**62, "post-1|c-2")]
    for _ in range(3_000):
        society, metric, dim = ("".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(3))
        cases.append((society, metric, rng.randint(-(2**63), 2**63), dim))
    for society, metric, start, dim in cases:
        expected = str(uuid.uuid5(_METRIC_NS, f"{society}|{metric}|{start}|{dim}"))
        assert metric_id(society, metric, start, dim) == expected
