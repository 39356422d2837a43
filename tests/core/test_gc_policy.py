"""The collector's cadence in processor processes (schedulerstream/gc_policy.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from schedulerstream.gc_policy import OLDER, tune_gc
from schedulerstream.settings import Settings


@pytest.fixture
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("thresholds")
def test_the_young_threshold_is_set_and_the_older_generations_follow_it() -> None:
    tune_gc(12_345)
    assert gc.get_threshold() == (12_345, *OLDER)


@pytest.mark.usefixtures("thresholds")
def test_zero_keeps_the_thresholds_python_has() -> None:
    gc.set_threshold(700, 10, 10)
    tune_gc(0)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.usefixtures("thresholds")
def test_the_collector_stays_on_and_frees_cycles() -> None:
    tune_gc(10_000)
    assert gc.isenabled()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    assert ref() is not None  # a cycle: reference counting alone does not free it
    gc.collect()
    assert ref() is None


def test_the_setting_defaults_to_ten_thousand_and_reads_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().gc_young_threshold == 10_000
    monkeypatch.setenv("SCHEDULERSTREAM_GC_YOUNG_THRESHOLD", "0")
    assert Settings().gc_young_threshold == 0
    monkeypatch.setenv("SCHEDULERSTREAM_GC_YOUNG_THRESHOLD", "-1")
    with pytest.raises(ValueError, match="gc_young_threshold"):
        Settings()
