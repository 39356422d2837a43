"""Prometheus metrics of the processors (names start ``schedulerstream_``).

``histogram``: the cheap histogram the runtime and topologies observe into (no dependencies);
``collectors``: scrape-time collectors reading the runtime's and the topologies' counters;
``exporter``: the HTTP endpoint a processor command starts on ``SCHEDULERSTREAM_METRICS_PORT``.
"""
