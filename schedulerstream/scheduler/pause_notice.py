"""The "paused" notification of a job paused by the system (a PauseJob: a 410, N failed runs;
a quarantine): a ``RunTriggered`` with trigger ``notification`` beside the paused version.

The scheduler emits it because only the scheduler knows that the pause took effect (a job
updated, resumed or already paused meanwhile ignores the PauseJob: no notice). Its id names the
paused version, which is written once, so a replay finds the job paused and emits nothing, and
the dispatcher drops a duplicate by id. The dispatcher sends it to the job's notify target
(``DispatchSpec.notice``); the snapshot it carries is the paused definition without its payload.
"""

from __future__ import annotations

import json
from typing import Any

from schedulerstream import notices
from schedulerstream.codec import Codec
from schedulerstream.model import notify_from_avro

MAX_LAST_ATTEMPT = 4096  # bytes of a PauseJob's last_attempt_json taken into the envelope


def paused_notice(
    codec: Codec, record: dict[str, Any], run_id: str | None, last_attempt_json: str | None,
    now_us: int,
) -> tuple[str, bytes] | None:  # fmt: skip
    """(notice run id, RunTriggered value) for the paused definition ``record`` (decoded
    JobDefinition), or None when the job does not ask for "paused" notifications."""
    notify = notify_from_avro(record.get("notify"))
    if notify is None or notices.PAUSED not in notify["on"]:
        return None
    tenant, job_id, version = record["tenant"], record["job_id"], record["version"]
    notice_id = notices.paused_id(f"{tenant}/{job_id}", version)
    payload = notices.envelope(notices.PAUSED, tenant, job_id, version, run_id,
                               record["paused_reason"], _last(last_attempt_json))  # fmt: skip
    snapshot = codec.encode("JobDefinition", {**record, "payload_json": None})
    value = codec.encode(
        "RunTriggered",
        {
            "run_id": notice_id, "tenant": tenant, "job_id": job_id, "scheduled_at_us": now_us,
            "not_before_us": now_us, "emitted_at_us": now_us, "trigger": notices.NOTIFICATION,
            "payload_json": payload, "job_version": version, "job_definition": snapshot,
        },
    )  # fmt: skip
    return notice_id, value


def _last(text: str | None) -> dict[str, Any] | None:
    if text is None or len(text) > MAX_LAST_ATTEMPT:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
