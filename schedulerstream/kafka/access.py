"""The startup access probe: before a component starts, check that the broker lets its principal
do what it needs (schedulerstream/kafka/acls.py), so a missing ACL, a wrong password or an
untrusted certificate stops it at once with a message naming the principal, the resource and the
operation, not a timeout or a stack trace deep in the runtime.

What is checked: authentication and TLS (the client's first connection); each literal topic's
operations (DescribeTopics with the authorized operations; a topic not created yet is skipped,
``wait_for_topics`` waits for it); Create by a validate-only creation; each group's Read
(DescribeGroups); each transactional id by initialising it (what the processor does next).
Operations on a topic prefix other than Create cannot be probed before such a topic exists.
A principal allowed to Alter the cluster (a super user, or any client of a cluster without an
authorizer, such as the plain development broker) skips the ACL checks: nothing can be missing.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from schedulerstream.errors import BrokerError
from schedulerstream.kafka.acls import GROUP, LITERAL, TOPIC, TRANSACTIONAL_ID, Need, needs
from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)

_OPERATION_NAMES = {"DESCRIBE_CONFIGS": "DescribeConfigs", "ALTER_CONFIGS": "AlterConfigs"}
_QUIET = logging.getLogger("schedulerstream.kafka.access.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def principal(config: dict[str, Any]) -> str:
    """The principal the broker will see, as far as the client config tells."""
    user = config.get("sasl.username")
    if user:
        return f"User:{user}"
    protocol = str(config.get("security.protocol", "plaintext")).upper()
    return f"the principal of this {protocol} client"


def check_access(
    settings: Settings,
    component: str,
    *,
    pools: Sequence[str] = (),
    instance_id: str | None = None,
    timeout: float = 10.0,
) -> None:
    """Raise BrokerError unless ``component`` can authenticate and has every ACL it needs."""
    config = base_config(settings)
    who = principal(config)
    admin = _connect(settings, config, who, timeout)
    if _unrestricted(admin, timeout):
        return
    missing: list[Need] = []
    wanted = needs(component, settings, pools)
    missing += _topics(admin, [n for n in wanted if n.resource == TOPIC], timeout)
    missing += _groups(admin, [n for n in wanted if n.resource == GROUP], timeout)
    for need in wanted:
        if need.resource == TRANSACTIONAL_ID:
            txn_id = f"{need.name}{instance_id or settings.instance_id}"
            if not _transactional_id_allowed(config, txn_id, timeout):
                missing.append(need)
    if missing:
        lines = "\n".join(f"  - {need.describe()}" for need in sorted(set(missing)))
        raise BrokerError(
            f"{component} cannot start: the broker at {settings.bootstrap_servers} does not "
            f"allow principal {who}:\n{lines}\n"
            f"(`schedulerstream acls plan` lists every ACL {component} needs; an admin grants "
            "them with `schedulerstream acls apply`)"
        )


def _connect(settings: Settings, config: dict[str, Any], who: str, timeout: float) -> AdminClient:
    """An admin client that has reached the broker; a failed login or TLS handshake is an
    error within a second or two rather than a silent retry until ``timeout``."""
    failures: list[KafkaError] = []
    hooks: dict[str, Any] = {"error_cb": failures.append, "logger": _QUIET}
    admin = AdminClient({**config, **hooks})
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=0.5)
            return admin
        except KafkaException:
            admin.poll(0)  # serves error_cb
        for error in failures:
            reason = _login_failure(error)
            if reason:
                raise BrokerError(
                    f"cannot connect to {settings.bootstrap_servers} as {who}: {reason}"
                )
        if time.monotonic() >= deadline:
            why = f" (last: {failures[-1].str()})" if failures else ""
            raise BrokerError(f"no broker answered at {settings.bootstrap_servers}{why}")


def _unrestricted(admin: AdminClient, timeout: float) -> bool:
    """True for a super user, or a cluster without an authorizer: every cluster operation,
    Alter included, is allowed, so no ACL can be missing (the plain broker stops here)."""
    future = admin.describe_cluster(include_authorized_operations=True, request_timeout=timeout)
    try:
        operations = future.result().authorized_operations
    except KafkaException:
        return False
    return "Alter" in {_operation(op) for op in operations or ()}


def _login_failure(error: KafkaError) -> str | None:
    text = error.str()
    if error.code() == KafkaError._AUTHENTICATION or "authentication" in text.lower():
        return f"authentication failed ({_tail(text)})"
    if error.code() == KafkaError._SSL or "SSL handshake failed" in text:
        return f"TLS handshake failed ({_tail(text)}); is ssl.ca.location the broker's CA?"
    return None


def _tail(text: str) -> str:
    """librdkafka's message without its broker prefix."""
    return text.split(": ", 1)[1] if text.startswith("sasl_ssl://") and ": " in text else text


def _operation(acl_operation: Any) -> str:
    name = str(acl_operation.name)
    return _OPERATION_NAMES.get(name, name.title())


def _topics(admin: AdminClient, wanted: list[Need], timeout: float) -> list[Need]:
    missing: list[Need] = []
    literal: dict[str, list[Need]] = defaultdict(list)
    for need in wanted:
        if need.operation == "Create":
            name = need.name if need.pattern == LITERAL else f"{need.name}probe"
            if not _create_allowed(admin, name, timeout):
                missing.append(need)
        elif need.pattern == LITERAL:
            literal[need.name].append(need)
    if not literal:
        return missing
    futures = admin.describe_topics(
        TopicCollection(list(literal)), request_timeout=timeout, include_authorized_operations=True
    )
    for name, future in futures.items():
        try:
            operations = future.result().authorized_operations
            if operations is None:
                continue  # the broker did not say
            allowed = {_operation(op) for op in operations}
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args else None
            if code != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                continue  # not created yet (or another problem wait_for_topics will report)
            allowed = set()
        missing += [n for n in literal[name] if n.operation not in allowed]
    return missing


def _create_allowed(admin: AdminClient, name: str, timeout: float) -> bool:
    future = admin.create_topics(
        [NewTopic(name, 1, 1)], validate_only=True, request_timeout=timeout
    )[name]
    try:
        future.result()
    except KafkaException as exc:
        code = exc.args[0].code() if exc.args else None
        return code not in (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        )
    return True


def _groups(admin: AdminClient, wanted: list[Need], timeout: float) -> list[Need]:
    names = sorted({n.name for n in wanted if n.pattern == LITERAL})
    if not names:
        return []
    futures = admin.describe_consumer_groups(
        names, request_timeout=timeout, include_authorized_operations=True
    )
    missing: list[Need] = []
    for name, future in futures.items():
        try:
            operations = future.result().authorized_operations
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                missing += [n for n in wanted if n.name == name]
            continue  # a group not created yet: nothing more to learn before joining it
        if operations is not None:
            allowed = {_operation(op) for op in operations}
            missing += [n for n in wanted if n.name == name and n.operation not in allowed]
    return missing


def _transactional_id_allowed(config: dict[str, Any], txn_id: str, timeout: float) -> bool:
    """Initialise ``txn_id`` (fencing an older instance of it, as the processor is about to)."""
    producer = Producer({**config, "transactional.id": txn_id, "logger": _QUIET})
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        code = exc.args[0].code() if exc.args else None
        if code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return False
        log.warning("transactional id %s could not be checked: %s", txn_id, exc)
    return True
