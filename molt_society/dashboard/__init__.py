"""The live web dashboard of a society: panels over ClickHouse, health from the broker and the sink."""
