"""Replay of event histories: the archive format, export, the publisher and `society replay`."""
