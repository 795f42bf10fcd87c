"""An experiment's result: ``data`` (what it is computed from), ``outcome`` (per metric, every arm against
control), ``page`` (its offline HTML page)."""
