"""Dispatch targets: one module per kind, all behind the ``Target`` Protocol.

``HttpTarget`` (here) and ``schedulerstream.targets.sqs.SqsTarget`` (imported on its own, so
aiobotocore loads only where SQS is used) are the senders; the job's configuration of the same
names lives in ``schedulerstream.model``. The Kafka target is a record builder
(``kafka_record``) because the dispatcher produces it in its own transaction.
"""

from schedulerstream.targets.base import Delivery, Outcome, OutcomeKind, Target
from schedulerstream.targets.breaker import CircuitBreaker
from schedulerstream.targets.http import HttpTarget
from schedulerstream.targets.kafka import kafka_record

__all__ = [
    "CircuitBreaker",
    "Delivery",
    "HttpTarget",
    "Outcome",
    "OutcomeKind",
    "Target",
    "kafka_record",
]
