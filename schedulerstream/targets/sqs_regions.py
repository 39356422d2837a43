"""Which regions an SQS client may be made for, from botocore's data (no client is made).

A region must be one botocore knows for SQS, unless an endpoint is configured, as for an
emulator (which signs with any name): ``AWS_ENDPOINT_URL_SQS`` or ``AWS_ENDPOINT_URL``, or
``endpoint_url`` in the profile (or in its ``services`` section, for ``sqs``) of the shared
config file, as botocore itself looks them up (``ignore_configured_endpoint_urls`` too).
The dispatcher refuses a run to another region; the API and ``schedules put`` say so first.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import botocore.session
from botocore.exceptions import BotoCoreError

from schedulerstream.model import JobDefinition, SqsTarget

ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL")


def endpoint_configured(session: Any = None) -> bool:
    """Whether SQS clients of ``session`` (botocore's default: None) get a configured
    endpoint, so that any region name goes."""
    session = session or _session()
    try:
        if session.get_config_variable("ignore_configured_endpoint_urls"):
            return False
        if any(os.environ.get(name) for name in ENDPOINT_VARIABLES):
            return True
        scoped = session.get_scoped_config()
        if scoped.get("endpoint_url"):
            return True
        services = session.full_config.get("services", {}).get(scoped.get("services"), {})
        return bool(services.get("sqs", {}).get("endpoint_url"))
    except BotoCoreError:  # a broken config file: the clients will say so when made
        return False


@functools.cache
def known_regions() -> frozenset[str]:
    """The SQS regions of every partition botocore knows (46 in botocore 1.43)."""
    session = _session()
    found: set[str] = set()
    for partition in session.get_available_partitions():
        found.update(session.get_available_regions("sqs", partition_name=partition))
    return frozenset(found)


def region_refusal(region: str, session: Any = None) -> str | None:
    """Why no SQS client may be made for ``region`` (None: it may)."""
    if endpoint_configured(session) or region in known_regions():
        return None
    return (f"{region!r} is not an SQS region this botocore knows (a newer botocore may; an "
            "emulator takes any name once AWS_ENDPOINT_URL_SQS is set)")  # fmt: skip


def region_refusals(job: JobDefinition) -> list[tuple[str, str]]:
    """(field, why) for each SQS target of ``job`` (``target``, ``notify.target``) whose region
    no client may be made for."""
    places = [("target", job.target)]
    if job.notify is not None:
        places.append(("notify.target", job.notify.target))
    found = []
    for field, target in places:
        refused = region_refusal(target.region) if isinstance(target, SqsTarget) else None
        if refused is not None:
            found.append((field, refused))
    return found


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()
