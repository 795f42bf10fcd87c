"""The pure parts of ``society.replay_direct``: dead letters numbered by their origin whatever order they
came in, and byte for byte."""

from __future__ import annotations

import random

from molt_society.society.replay_direct import _DeadLetters


def test_dead_letters_come_back_by_origin_byte_for_byte() -> None:
    rng = random.Random(3)
    letters = [
        (
            rng.randrange(4),
            offset,
            None if rng.random() < 0.3 else rng.randbytes(rng.randrange(1, 20)),
            rng.randbytes(rng.randrange(0, 300)),
            [("dlq-reason", rng.randbytes(rng.randrange(0, 40))), ("dlq-code", b"unknown_post")],
        )
        for offset in range(300)
    ]
    shuffled = letters[:]
    rng.shuffle(shuffled)  # as two state processes may send them
    dead = _DeadLetters()
    try:
        for letter in shuffled:
            dead.add(*letter)
        got = list(dead.records())
    finally:
        dead.spill.close()
    expected = [(key, value, headers) for _, _, key, value, headers in sorted(letters, key=lambda x: x[:2])]
    assert got == expected
