"""``society experiment``: fork a base into arms x seeds, run each pair on the local stack, record it.

``runner`` (the command), ``base`` (the base and one pair's run), ``plan`` (an arm's interventions),
``tables`` (its ClickHouse table and reads), ``display`` (its progress).
"""
