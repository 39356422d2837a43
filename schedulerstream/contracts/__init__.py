"""What the components agree on, defined once: topic names, policy values, the worker wire.

Pure core (no Kafka client, no HTTP): the scheduler, dispatcher, projector, API, CLI and the
worker SDK import these instead of spelling the names and values themselves.
"""
