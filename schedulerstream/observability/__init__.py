"""Prometheus metrics of the processors (names start ``schedulerstream_``).

The cheap histogram the runtime and topologies observe into is ``schedulerstream/histogram.py``
(core: the runtime may import it, while this package imports the runtime).
``lateness``: trigger lateness from emitted run records (the scheduler observes it);
``collectors``: scrape-time collectors reading the runtime's and the topologies' counters;
``exporter``: the HTTP endpoint a processor command starts on ``SCHEDULERSTREAM_METRICS_PORT``.
"""
