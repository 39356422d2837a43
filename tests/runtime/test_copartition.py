"""The co-partitioning check every topology applies to its input records."""

from __future__ import annotations

import pytest

from schedulerstream.ingest import RejectedRecord
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.runtime.copartition import check_home_partition


def test_a_record_on_its_home_partition_passes_and_elsewhere_is_rejected() -> None:
    home = partition_for_job_key("acme/report", 12)
    check_home_partition("acme/report", home, 12)
    other = (home + 1) % 12
    with pytest.raises(RejectedRecord, match=rf"'acme/report' belongs on partition {home} "):
        check_home_partition("acme/report", other, 12)


def test_the_reason_names_the_record_when_its_key_is_a_run_id() -> None:
    home = partition_for_job_key("acme/report", 12)
    run_id = "acme/report@2026-01-01T00:00:00Z"
    with pytest.raises(RejectedRecord, match=f"'{run_id}' belongs on partition {home}"):
        check_home_partition("acme/report", (home + 1) % 12, 12, record=run_id)
