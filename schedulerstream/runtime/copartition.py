"""Co-partitioning, checked where a record enters a task: every input is keyed by a job key
(or by a run id of it) and sits on the partition murmur2 of that job key chooses, so one task
sees all of a job's records, whichever topic carries them."""

from __future__ import annotations

from schedulerstream.ingest import RejectedRecord
from schedulerstream.partitioner import partition_for_job_key


def check_home_partition(
    job_key: str, partition: int, partitions: int, record: str | None = None
) -> None:
    """Raise RejectedRecord unless ``job_key`` belongs on ``partition`` (of ``partitions``);
    ``record`` names the record in the reason when its key is not the job key itself."""
    home = partition_for_job_key(job_key, partitions)
    if home != partition:
        raise RejectedRecord(
            f"{record or job_key!r} belongs on partition {home} (murmur2 of the job key), "
            f"not {partition}: produce with the murmur2 partitioner"
        )
