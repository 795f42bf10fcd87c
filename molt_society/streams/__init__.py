"""Stream processing of the LLM-agent society: metrics computed from event streams."""
