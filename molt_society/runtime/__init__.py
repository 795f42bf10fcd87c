"""The ground floor every running process stands on: settings, logs, the broker, Kafka clients.

Nothing here knows about agents, streams, sinks or reports; everything above imports from here.
"""
