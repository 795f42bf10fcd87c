"""``society report``: the MoltBook studies' diagnostics of a society, as offline HTML and JSON."""
