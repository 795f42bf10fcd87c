"""Probing agents (Superminds Test): controlled agents post tasks with known answers into a society and
measure how it responds. ``tasks`` makes the probes, ``inject`` posts them, ``score`` scores the threads,
``judge`` decides Tier I answers, ``shared_memory`` asks who is influential, ``session`` runs it all."""
