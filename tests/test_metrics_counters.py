"""Every counter a topology keeps is exported: a counter no scrape reads is dead code."""

from __future__ import annotations

from dataclasses import fields

from schedulerstream.dispatcher.context import Counters as DispatcherCounters
from schedulerstream.observability.collectors import DISPATCHER_COUNTERS, SCHEDULER_COUNTERS
from schedulerstream.scheduler.counters import Counters as SchedulerCounters

# exported as labelled series of their own (runs_emitted by trigger, runs_finished by outcome)
BY_LABEL = {"by_trigger", "finished"}


def test_every_scheduler_counter_is_exported() -> None:
    kept = {f.name for f in fields(SchedulerCounters)} - BY_LABEL
    assert kept == set(SCHEDULER_COUNTERS)


def test_every_dispatcher_counter_is_exported() -> None:
    kept = {f.name for f in fields(DispatcherCounters)} - BY_LABEL
    assert kept == set(DISPATCHER_COUNTERS)
