"""Dispatch targets: one module per kind, all behind the ``Sender`` Protocol.

``HttpSender`` (here) and ``schedulerstream.targets.sqs.SqsSender`` (imported on its own, so
aiobotocore loads only where SQS is used) are the senders; the job's configuration of the same
names lives in ``schedulerstream.model``. The Kafka target is a record builder
(``kafka_record``) because the dispatcher produces it in its own transaction.
"""

from schedulerstream.targets.base import Delivery, Outcome, OutcomeKind, Sender
from schedulerstream.targets.breaker import CircuitBreaker
from schedulerstream.targets.http import HttpSender
from schedulerstream.targets.kafka import kafka_record

__all__ = [
    "CircuitBreaker",
    "Delivery",
    "HttpSender",
    "Outcome",
    "OutcomeKind",
    "Sender",
    "kafka_record",
]
