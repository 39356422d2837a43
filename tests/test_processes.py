"""``schedulerstream dispatcher --processes N``: N members of the group under one supervisor,
real processes on the real broker."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from harness.procs import settings_env
from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings
from schedulerstream.supervisor import Component, Supervisor, members
from tests.support.waits import wait_until

# (member id, client id, its partitions of cron.runs) of each member of the group
Members = list[tuple[str, str, set[int]]]
_NOT_YET = {KafkaError._TIMED_OUT, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
            KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.GROUP_ID_NOT_FOUND}  # fmt: skip


def test_members_have_their_own_identity_state_and_metrics_port(tmp_path: Path) -> None:
    settings = Settings(instance_id="node7", data_dir=tmp_path, metrics_port=9300)
    two = members("dispatcher", ["dispatcher"], 2, settings)
    assert [m.name for m in two] == ["dispatcher-1", "dispatcher-2"]
    assert [m.env["SCHEDULERSTREAM_INSTANCE_ID"] for m in two] == ["node7-1", "node7-2"]
    assert [m.env["SCHEDULERSTREAM_DATA_DIR"] for m in two] == [
        str(tmp_path / "dispatcher-1"),
        str(tmp_path / "dispatcher-2"),
    ]
    assert [m.env["SCHEDULERSTREAM_METRICS_PORT"] for m in two] == ["9300", "9301"]
    unmetered = members(
        "scheduler", ["scheduler"], 3, settings.model_copy(update={"metrics_port": 0})
    )
    assert {m.env["SCHEDULERSTREAM_METRICS_PORT"] for m in unmetered} == {"0"}
    (one,) = members("dispatcher", ["dispatcher"], 1, settings)  # N == 1: as it was
    assert (one.name, one.env) == ("dispatcher", {})


def test_projector_processes_needs_postgresql(tmp_path: Path) -> None:
    env = settings_env(Settings(data_dir=tmp_path, database_url=""))
    done = subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", "projector", "--processes", "2"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "needs PostgreSQL" in done.stderr  # several SQLite writers would split the model
    assert "started" not in done.stderr  # refused before any member started


def group_members(settings: Settings) -> Members:
    admin = AdminClient(base_config(settings))
    group = f"{settings.topic_prefix}dispatcher"
    found = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    runs = f"{settings.topic_prefix}runs"
    return [
        (
            m.member_id,
            m.client_id,
            {tp.partition for tp in m.assignment.topic_partitions if tp.topic == runs},
        )
        for m in found.members
    ]


def split_between(settings: Settings, ids: set[str]) -> Members | None:
    """The group's members when they are exactly one client of each instance id in ``ids``
    (its client id ends with it) and each holds a share of the partitions (disjoint, all of
    them); else None."""
    try:
        found = group_members(settings)
    except KafkaException as exc:  # the group or its coordinator is not there yet: not split
        if not exc.args[0].retriable() and exc.args[0].code() not in _NOT_YET:
            raise
        return None
    shares = [partitions for _, _, partitions in found]
    every = set().union(*shares)
    whole = every == set(range(settings.partitions)) and sum(map(len, shares)) == len(every)
    ours = sorted(i for _, client, _ in found for i in ids if client.endswith(i))
    return (
        found if ours == sorted(ids) and len(found) == len(ids) and all(shares) and whole else None
    )


def started_pid(text: str, member: str, nth: int) -> int | None:
    pids = re.findall(rf"{member}: started \(pid (\d+)\)", text)
    return int(pids[nth - 1]) if len(pids) >= nth else None


@pytest.mark.kafka
def test_dispatcher_processes_2_shares_the_group_heals_after_kill_9_and_stops_cleanly(
    topo: Settings, tmp_path: Path
) -> None:
    log = tmp_path / "supervisor.log"
    env = settings_env(topo, data_dir=tmp_path / "state")
    with log.open("w") as out:  # a file, not a pipe nobody reads while the test waits
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "schedulerstream.cli", "dispatcher", "--processes", "2"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def text() -> str:
        return log.read_text(errors="replace")

    def alive() -> bool:
        assert supervisor.poll() is None, text()[-4000:]
        return True

    ids = {f"-{topo.instance_id}-{k}" for k in (1, 2)}
    try:
        before = wait_until(
            lambda: alive() and split_between(topo, ids), 120, "two members sharing the partitions"
        )
        (killed,) = [
            member for member, client, _ in before if client.endswith(f"{topo.instance_id}-1")
        ]
        assert f"processor=dispatcher instance={topo.instance_id}-1 " in text()
        assert f"processor=dispatcher instance={topo.instance_id}-2 " in text()
        for k in (1, 2):  # each member's state stores are its own
            assert (tmp_path / "state" / f"dispatcher-{k}" / "dispatcher").is_dir()
        victim = started_pid(text(), "dispatcher-1", 1)
        survivor = started_pid(text(), "dispatcher-2", 1)
        assert victim is not None and survivor is not None
        os.kill(victim, signal.SIGKILL)

        respawned = wait_until(
            lambda: alive() and started_pid(text(), "dispatcher-1", 2), 60, "dispatcher-1 restarted"
        )
        assert respawned != victim
        assert "dispatcher-1: exited with -9; restart in 1s" in text()
        assert started_pid(text(), "dispatcher-2", 2) is None  # the other member was left alone

        # healed: the killed member is gone, the restarted one (same client id, a new member
        # id) has its share again
        def healed() -> Members | None:
            found = split_between(topo, ids)
            return found if found and killed not in {member for member, _, _ in found} else None

        wait_until(lambda: alive() and healed(), 120, "the group healed after kill -9")

        def restarted_runs_tasks() -> bool:
            since = text().split(f"dispatcher-1: started (pid {respawned})", 1)[-1]
            return bool(re.search(r"^\[dispatcher-1\] .* running: restored", since, re.M))

        wait_until(restarted_runs_tasks, 60, "the restarted member running its tasks")
    finally:
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM)
        try:
            code = supervisor.wait(90)
        except subprocess.TimeoutExpired:
            for pid in [supervisor.pid, *map(int, re.findall(r"started \(pid (\d+)\)", text()))]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # each member leads its own session
            raise
    assert code == 0, text()[-4000:]
    assert "dispatcher-1: stopped (exit 0)" in text(), text()[-4000:]
    assert "dispatcher-2: stopped (exit 0)" in text(), text()[-4000:]
    for pid in (respawned, survivor):  # no member outlives its supervisor
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_member_stopped_before_it_set_up_its_handler_counts_as_a_clean_stop() -> None:
    said: list[str] = []
    member = Component("api", ["api"])
    # a process with SIGTERM's default action, as a member still importing is
    member.process = subprocess.Popen(["sleep", "60"], start_new_session=True, text=True)
    supervisor = Supervisor([member], said.append)
    assert supervisor.stop(timeout=30)
    assert said == [f"api: stopped (exit {-signal.SIGTERM})"]
