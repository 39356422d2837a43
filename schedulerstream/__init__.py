"""schedulerstream: a distributed cron scheduler on Apache Kafka."""

__version__ = "0.1.0"
