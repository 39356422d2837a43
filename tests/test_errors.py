"""One exception hierarchy: every exception class the package defines derives from
``SchedulerStreamError`` (schedulerstream/errors.py), found by importing every module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import schedulerstream
from schedulerstream.errors import SchedulerStreamError


def defined_exceptions() -> dict[str, type[BaseException]]:
    """``module.Class`` → class, for every exception class defined in the package."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(schedulerstream.__path__, "schedulerstream."):
        if info.name.rpartition(".")[2] == "__main__":
            continue  # running it is what importing it does
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{info.name}.{name}"] = value
    return found


FOUND = defined_exceptions()


def test_every_exception_of_the_package_derives_from_the_root() -> None:
    strays = sorted(
        name for name, cls in FOUND.items() if not issubclass(cls, SchedulerStreamError)
    )
    assert not strays, f"derive these from SchedulerStreamError (errors.py): {strays}"


def test_the_walk_finds_exceptions_in_every_layer() -> None:
    for name in (
        "schedulerstream.errors.SchedulerStreamError",
        "schedulerstream.runtime.transaction.TransactionFailed",
        "schedulerstream.projector.topology.ReadModelDown",
        "schedulerstream.api.errors.ApiError",
        "schedulerstream.targets.ssrf.BlockedAddressError",
        "schedulerstream.worker.app.JobFailed",
    ):
        assert name in FOUND


def test_the_ssrf_refusal_is_still_an_os_error_for_aiohttp() -> None:
    assert issubclass(FOUND["schedulerstream.targets.ssrf.BlockedAddressError"], OSError)
