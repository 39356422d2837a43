"""``schedulerstream dev``: the whole scheduler on one machine, broker included.

Two conveniences exist only here, each announced when dev starts and each with a switch:
Kafka target topics that jobs name are created when missing (a production cluster has
auto-creation off and wants them created on purpose), and webhooks may reach loopback and
private addresses (so a receiver on this machine works; production refuses them).
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Callable

import click
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

# confluent_kafka.admin documents these names but re-exports them implicitly (mypy strict).
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from schedulerstream.codec import Codec, default_codec
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.ingest import RejectedRecord, decode_schedule
from schedulerstream.kafka import topics
from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.kafka.clients import base_config
from schedulerstream.model import KafkaTarget
from schedulerstream.settings import ENV_PREFIX, Settings, load_settings
from schedulerstream.supervisor import METRICS_PORT, Component, Supervisor, members

ALLOW_PRIVATE = f"{ENV_PREFIX}ALLOW_PRIVATE_TARGETS"
INSTANCE_ID = f"{ENV_PREFIX}INSTANCE_ID"
TARGET_TOPIC_PARTITIONS = 1
RETRY_S = 5.0


def say(line: str) -> None:
    click.secho(f"schedulerstream dev | {line}", fg="green", err=True)


def processor_metrics(first: int) -> dict[str, dict[str, str]]:
    """The environment giving each processor its own metrics port (``first`` and the next
    two), or none (0) when ``first`` is 0."""
    names = ("scheduler", "dispatcher", "projector")
    return {
        name: {"SCHEDULERSTREAM_METRICS_PORT": str(first + i if first else 0)}
        for i, name in enumerate(names)
    }


def dev_dispatchers() -> int:
    """Dispatcher processes dev starts: half the machine's cores, at least one (the other half
    is for the broker, the scheduler, the projector and the API)."""
    return max(1, (os.cpu_count() or 1) // 2)


def dispatcher_members(settings: Settings, env: dict[str, str], processes: int) -> list[Component]:
    """The dispatcher's members (``env``: theirs in common): the first on the dispatcher's
    metrics port, member k ≥ 2 on that port + k (after the projector's)."""
    first = int(env[METRICS_PORT])
    own = settings.model_copy(update={"instance_id": env[INSTANCE_ID], "metrics_port": first})
    group = members("dispatcher", ["dispatcher"], processes, own)
    for k, member in enumerate(group, start=1):
        member.env = {**env, **member.env}
        if k > 1 and first:
            member.env[METRICS_PORT] = str(first + k)
    return group


def dev_instance_id(settings: Settings) -> str:
    """One identity for this machine and data dir, kept across restarts of ``dev``.

    A processor's transactional id is its group plus this id, so a restarted (or crashed and
    respawned) processor fences its predecessor at once and aborts the transaction it left
    open, instead of every read_committed reader (its own restore, the projector) waiting out
    the transaction timeout behind it, as a new ``host-pid`` id per start would."""
    where = hashlib.sha1(str(settings.data_dir.resolve()).encode()).hexdigest()[:8]
    return f"dev-{os.uname().nodename}-{where}"


class TargetTopics:
    """dev only: creates the topic a job's Kafka target names when it does not exist.

    Follows ``{prefix}schedules`` from the beginning; once caught up (nothing new for a
    moment) it creates the topics of the live jobs (latest value per key, tombstones
    forgotten), then each new definition's as it arrives. A failure is printed, never fatal.
    """

    def __init__(
        self, settings: Settings, report: Callable[[str], None], codec: Codec | None = None
    ) -> None:
        self.settings = settings
        self.report = report
        self.codec = codec or default_codec()
        self.topic = settings.topics.schedules
        self.known: set[str] = set()  # exist (created here or found)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._admin: AdminClient | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dev-target-topics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def target_of(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> str | None:
        """The Kafka target topic of a schedules record, or None (other target, tombstone, or
        a record the scheduler rejects anyway)."""
        if value is None:
            return None
        try:
            job = decode_schedule(self.codec, key, value, timestamp_ms * 1000).job
        except (RejectedRecord, SchedulerStreamError):
            return None
        return job.target.topic if isinstance(job.target, KafkaTarget) else None

    def ensure(self, topic: str, job_key: str) -> None:
        """Create ``topic`` unless it exists; say so when it was created."""
        if topic in self.known:
            return
        admin = self._admin_client()
        metadata = admin.list_topics(topic=topic, timeout=10)
        found = metadata.topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            self.known.add(topic)
            return
        new = NewTopic(
            topic,
            num_partitions=TARGET_TOPIC_PARTITIONS,
            replication_factor=self.settings.replication_factor,
        )
        try:
            admin.create_topics([new], operation_timeout=10)[topic].result()
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                self.report(f"target topics: cannot create {topic!r} for {job_key}: {exc}")
                return
        else:
            topics.wait_for_topics(self.settings, [topic], timeout=10)
            self.report(
                f"target topics: created Kafka topic {topic!r} ({TARGET_TOPIC_PARTITIONS} "
                f"partition) for job {job_key} (dev only)"
            )
        self.known.add(topic)

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(base_config(self.settings))
        return self._admin

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except Exception as exc:  # a broker hiccup, say: say it and start over
                self.report(f"target topics: {type(exc).__name__}: {exc}; again in {RETRY_S:g} s")
                self._stop.wait(RETRY_S)

    def _follow(self) -> None:
        config = base_config(self.settings)
        config.update(
            {
                "group.id": f"schedulerstream-dev-target-topics-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 50,  # see a new job at once: its first run may be near
            }
        )
        consumer = Consumer(config)
        try:
            info = consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if info is None or info.error is not None or not info.partitions:
                raise SchedulerStreamError(f"no topic {self.topic}")
            consumer.assign([TopicPartition(self.topic, p, 0) for p in sorted(info.partitions)])
            backlog: dict[str, str | None] = {}  # job key -> its target topic, until caught up
            caught_up = False
            while not self._stop.is_set():
                batch = consumer.consume(500, timeout=0.5)
                if not batch and not caught_up:
                    caught_up = True
                    for job_key, topic in backlog.items():
                        if topic is not None:
                            self.ensure(topic, job_key)
                    backlog.clear()
                for message in batch:
                    if message.error() is not None:
                        continue
                    key = message.key()
                    job_key = (key or b"").decode("utf-8", "replace")
                    topic = self.target_of(key, message.value(), message.timestamp()[1])
                    if not caught_up:
                        backlog[job_key] = topic
                    elif topic is not None:
                        self.ensure(topic, job_key)
        finally:
            consumer.close()


@click.command()
@click.option("--keep-broker", is_flag=True, help="Leave the broker running on exit.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port of the REST API.")  # fmt: skip
@click.option("--metrics-port", type=click.IntRange(0, 65533), default=None,
              help="First of three /metrics ports: scheduler, dispatcher, projector "
                   "(default SCHEDULERSTREAM_METRICS_PORT; 0: none).")  # fmt: skip
@click.option("--dispatcher-processes", type=click.IntRange(min=1), default=None,
              help="Dispatcher processes (default: half the cores, at least 1).")  # fmt: skip
@click.option(
    "--create-target-topics/--no-create-target-topics",
    default=True,
    show_default=True,
    help="Create the Kafka topic a job's target names if missing (dev only).",
)
@click.option(
    "--allow-private-targets/--no-allow-private-targets",
    default=None,
    help="Let webhooks reach loopback and private addresses (dev default: allowed, "
    "unless SCHEDULERSTREAM_ALLOW_PRIVATE_TARGETS says otherwise).",
)
def dev(
    keep_broker: bool,
    port: int,
    metrics_port: int | None,
    dispatcher_processes: int | None,
    create_target_topics: bool,
    allow_private_targets: bool | None,
) -> None:
    """Run broker, topics and every processor, supervised; Ctrl-C stops it all cleanly."""
    settings = load_settings()
    metrics = processor_metrics(settings.metrics_port if metrics_port is None else metrics_port)
    broker = LocalBroker(settings)
    try:
        started_broker = not broker.answers()
        say(f"kafka: {broker.up()}")
        for line in topics.apply(settings):
            click.echo(f"  {line}", err=True)
        say(f"topics: ready (prefix {settings.topic_prefix!r}, {settings.partitions} partitions)")
    except SchedulerStreamError as exc:
        raise click.ClickException(str(exc)) from exc
    if allow_private_targets is None:  # an explicit setting wins over the dev default
        allow_private_targets = (
            settings.allow_private_targets if ALLOW_PRIVATE in os.environ else True
        )
    common = {
        ALLOW_PRIVATE: "true" if allow_private_targets else "false",
        INSTANCE_ID: os.environ.get(INSTANCE_ID) or dev_instance_id(settings),
    }
    if allow_private_targets:
        say(
            f"dev only: webhooks may reach loopback and private addresses ({ALLOW_PRIVATE}=true "
            "for its processes), so a receiver on this machine works; production refuses them "
            "(--no-allow-private-targets)"
        )
    follower = None
    if create_target_topics:
        say(
            "dev only: the Kafka topic a job's target names is created when missing "
            f"({TARGET_TOPIC_PARTITIONS} partition); on a real cluster create it first "
            "(--no-create-target-topics)"
        )
        follower = TargetTopics(settings, say)
        follower.start()
    components = [
        Component("scheduler", ["scheduler"], {**common, **metrics["scheduler"]}),
        *dispatcher_members(
            settings, {**common, **metrics["dispatcher"]}, dispatcher_processes or dev_dispatchers()
        ),
        Component("projector", ["projector"], {**common, **metrics["projector"]}),
        Component("api", ["api", "--port", str(port)], common),
    ]
    if metrics["scheduler"]["SCHEDULERSTREAM_METRICS_PORT"] != "0":
        ports = ", ".join(f"{n} :{e['SCHEDULERSTREAM_METRICS_PORT']}" for n, e in metrics.items())
        say(f"metrics: {ports} (/metrics; the API's is on its own port)")
    from schedulerstream.api.ui.announce import with_console_url  # says the console's URL

    try:
        Supervisor(components, with_console_url(port, say)).run()
    finally:
        if follower is not None:
            follower.stop()
    if started_broker and not keep_broker:
        say(f"kafka: {broker.down()}")
