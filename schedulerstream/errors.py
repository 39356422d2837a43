"""The one exception hierarchy of schedulerstream."""

from __future__ import annotations


class SchedulerStreamError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(SchedulerStreamError):
    """A setting or environment variable is missing or invalid."""


class ValidationError(SchedulerStreamError):
    """User input is invalid; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class CronSyntaxError(ValidationError):
    """A cron expression does not parse; ``field`` names the cron field."""


class UnknownTimeZoneError(ValidationError):
    """A time zone name is not a known IANA zone."""


class CodecError(SchedulerStreamError):
    """Bytes could not be decoded into an event (bad marker, unknown schema, corrupt body)."""


class RejectedRecord(SchedulerStreamError):
    """An input record that cannot be accepted; the message is the reason."""


class StateTooLarge(RejectedRecord):
    """A logged state record over the record limit, refused where it is written: the broker
    would refuse it in the changelog, and with it every other partition's commit."""


class BrokerError(SchedulerStreamError):
    """The local Kafka broker could not be fetched, started, stopped or reached."""


class ConnectError(SchedulerStreamError):
    """The Kafka Connect worker could not be fetched, started or reached, or a connector failed."""


class TopologyError(SchedulerStreamError):
    """Topics on the cluster disagree with the declared topology."""


class TooManyWorkPools(SchedulerStreamError):
    """A new worker pool's topic is not made: the cluster holds SCHEDULERSTREAM_MAX_WORK_POOLS
    work topics already. ``pools``: the pools whose topics it held; ``cap``: the setting."""

    def __init__(self, message: str, pools: frozenset[str] = frozenset(), cap: int = 0) -> None:
        super().__init__(message)
        self.pools = pools
        self.cap = cap


class StateError(SchedulerStreamError):
    """A local state store is missing, corrupt, or out of step with its changelog."""


class UndecodableRecord(StateError):
    """A changelog record its topology cannot read (written by another producer, or damaged),
    raised by a ``restore_record`` before it writes anything: the restore skips the record,
    logged and counted."""

    @classmethod
    def at(cls, key: bytes, exc: Exception) -> UndecodableRecord:
        """The record at ``key``, whose decoding raised ``exc``."""
        return cls(f"key {key[:80]!r}: {type(exc).__name__}: {exc}"[:500])


class DependencyDown(SchedulerStreamError):
    """Something outside Kafka a processor writes to (the read model) stayed down. The runtime
    catches it before any ``except Exception``: it aborts the open transaction and re-raises
    it, so the processor stops and its records are processed again on restart."""


class FencedError(SchedulerStreamError):
    """This instance's transactional producer was fenced: another owner took over."""
