"""Which regions an SQS client may be made for, from botocore's data (no client is made).

A region must be one botocore knows for SQS, unless an endpoint is configured, as for an
emulator (which signs with any name): ``AWS_ENDPOINT_URL_SQS`` or ``AWS_ENDPOINT_URL``, or
``endpoint_url`` in the profile (or in its ``services`` section, for ``sqs``) of the shared
config file, as botocore looks them up (``ignore_configured_endpoint_urls`` too). The
dispatcher refuses a run to another region; the API and ``schedules put`` say so first. An
adapter beside the core: botocore's files only, no network.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import botocore.loaders
import botocore.regions
import botocore.session

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.model import JobDefinition, SqsTarget

log = logging.getLogger(__name__)
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL")
IGNORE_VARIABLE = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"


class _Unreadable(SchedulerStreamError):
    """The shared config file could not be read as botocore reads it."""


def endpoint_configured(session: Any = None) -> bool:
    """Whether SQS clients of ``session`` (botocore's default: None, its config read once)
    get a configured endpoint, so that any region name goes. Raises ``_Unreadable`` when
    the shared config file cannot be read."""
    session = session or _session()
    try:
        ignore = bool(session.get_config_variable("ignore_configured_endpoint_urls"))
    except Exception:  # a profile that is not there, say: the environment still counts
        ignore = os.environ.get(IGNORE_VARIABLE, "").lower() == "true"
    if ignore:
        return False
    if any(os.environ.get(name) for name in ENDPOINT_VARIABLES):
        return True
    try:
        scoped = session.get_scoped_config()
        if scoped.get("endpoint_url"):
            return True
        name = scoped.get("services")
        section = session.full_config.get("services", {}).get(name) if name else None
        sqs = section.get("sqs") if isinstance(section, dict) else None
        return isinstance(sqs, dict) and bool(sqs.get("endpoint_url"))
    except Exception as exc:
        raise _Unreadable(f"{type(exc).__name__}: {exc}") from exc


@functools.cache
def known_regions() -> frozenset[str]:
    """The SQS regions of every partition botocore knows (46 in botocore 1.43), from its
    data files alone: a session would read the shared config file first, which may not
    parse."""
    loader = botocore.loaders.create_loader(os.environ.get("AWS_DATA_PATH"))
    resolver = botocore.regions.EndpointResolver(loader.load_data("endpoints"))
    return frozenset(
        region
        for partition in resolver.get_available_partitions()
        for region in resolver.get_available_endpoints("sqs", partition)
    )


def region_refusal(region: str, session: Any = None) -> str | None:
    """Why no SQS client may be made for ``region`` (None: it may)."""
    try:
        known = region in known_regions()
    except Exception as exc:  # botocore's data unreadable: no region is known
        known = False
        log.warning("botocore's region data cannot be read: %s", exc)
    if known:
        return None
    unknown = f"{region!r} is not an SQS region this botocore knows (a newer botocore may"
    try:
        if endpoint_configured(session):
            return None
    except _Unreadable as exc:
        return f"{unknown}), and the AWS config that may set an endpoint is unreadable ({exc})"
    return f"{unknown}; an emulator takes any name once AWS_ENDPOINT_URL_SQS is set)"


def region_refusals(job: JobDefinition) -> list[tuple[str, str]]:
    """(field, why) for each SQS target of ``job`` (``target``, ``notify.target``) whose
    region no client may be made for."""
    found = []
    for field, target in job.targets():
        if isinstance(target, SqsTarget):
            refused = region_refusal(target.region)
            if refused is not None:
                found.append((field, refused))
    return found


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()
