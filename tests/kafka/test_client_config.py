"""The user's Kafka client properties: a Java client.properties file and
SCHEDULERSTREAM_KAFKA_<PROPERTY> variables, reaching every client config, owned ones refused,
secrets never shown."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from schedulerstream.client_properties import OWNED, parse_properties, property_name
from schedulerstream.errors import ConfigError
from schedulerstream.kafka import clients
from schedulerstream.kafka.connect import ConnectJars, worker_properties
from schedulerstream.settings import Settings, load_settings

SECRET = "s3cr3t-Pa55"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("SCHEDULERSTREAM_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_java_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism : SCRAM-SHA-512\n"
        "sasl.username admin\n"
        "  ssl.ca.location = /etc/ca\\\n"
        "    .pem\n"
        "sasl.password=p\\=a\\u0073s\\\\\n"
        "\n"
    )
    parsed = {k: v for k, (_, v) in parse_properties(text).items()}
    assert parsed == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "ssl.ca.location": "/etc/ca.pem",
        "sasl.password": "p=ass\\",
    }


def test_variable_names() -> None:
    assert property_name("SECURITY_PROTOCOL") == "security.protocol"
    assert property_name("SSL_CA_LOCATION") == "ssl.ca.location"
    assert property_name("LOG__LEVEL") == "log_level"


def test_file_and_variables_reach_every_builder(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config_file = tmp_path / "client.properties"
    config_file.write_text(f"security.protocol=SASL_SSL\nsasl.password={SECRET}\nlinger.ms=50\n")
    clean_env.setenv("SCHEDULERSTREAM_KAFKA_CONFIG_FILE", str(config_file))
    clean_env.setenv("SCHEDULERSTREAM_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    clean_env.setenv("SCHEDULERSTREAM_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")  # wins
    clean_env.setenv("SCHEDULERSTREAM_KAFKA_VERSION", "4.1.1")  # a setting, not a property
    settings = load_settings()
    assert settings.kafka_version == "4.1.1"
    configs = [
        clients.base_config(settings),
        clients.producer_config(settings),
        clients.transactional_producer_config(settings, "tid"),
        clients.consumer_config(settings, "group"),
        clients.consumer_config(settings, "group", copartitioned=True),
        clients.restore_consumer_config(settings, "group", committed=False),
    ]
    for config in configs:
        assert config["security.protocol"] == "SASL_PLAINTEXT"
        assert config["sasl.mechanism"] == "SCRAM-SHA-512"
        assert config["sasl.password"] == SECRET
        assert "version" not in config
    assert configs[1]["linger.ms"] == "50"  # the user's value wins over a default
    assert configs[2]["transactional.id"] == "tid"
    assert configs[3]["isolation.level"] == "read_committed"


@pytest.mark.parametrize("name", sorted(OWNED))
def test_owned_property_in_a_variable_is_refused(clean_env: pytest.MonkeyPatch, name: str) -> None:
    variable = "SCHEDULERSTREAM_KAFKA_" + name.replace(".", "_").upper()
    clean_env.setenv(variable, SECRET)
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert variable in str(error.value) and repr(name) in str(error.value)
    assert SECRET not in str(error.value)


def test_owned_property_in_the_file_is_refused(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config_file = tmp_path / "client.properties"
    config_file.write_text(f"sasl.password={SECRET}\nisolation.level=read_uncommitted\n")
    clean_env.setenv("SCHEDULERSTREAM_KAFKA_CONFIG_FILE", str(config_file))
    with pytest.raises(ConfigError, match=r"client.properties:2: .*'isolation.level'") as error:
        load_settings()
    assert SECRET not in str(error.value)


def test_missing_file_is_a_clear_error(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("SCHEDULERSTREAM_KAFKA_CONFIG_FILE", str(tmp_path / "nope.properties"))
    with pytest.raises(ConfigError, match=r"SCHEDULERSTREAM_KAFKA_CONFIG_FILE .*nope\.properties"):
        load_settings()


def test_secrets_never_shown(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clean_env.setenv("SCHEDULERSTREAM_KAFKA_SASL_PASSWORD", SECRET)
    caplog.set_level(logging.DEBUG)
    settings = load_settings()
    logging.getLogger("test").info("settings %s %r", settings, settings)
    assert settings.kafka_properties == {"sasl.password": SECRET}
    assert SECRET not in repr(settings) and SECRET not in str(settings)
    assert "kafka_properties" not in settings.model_dump()  # not passed on as a variable
    assert SECRET not in caplog.text


def test_connect_worker_gets_the_properties_in_java_names(tmp_path: Path) -> None:
    settings = Settings(
        kafka_properties={
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "connect",
            "sasl.password": SECRET,
            "ssl.ca.location": "/ca.pem",
        }
    )
    props = worker_properties(settings, ConnectJars(tmp_path, tmp_path), 8083)
    for role in ("", "producer.", "consumer.", "admin."):
        assert props[f"{role}security.protocol"] == "SASL_SSL"
        assert props[f"{role}ssl.truststore.type"] == "PEM"
        assert props[f"{role}ssl.truststore.location"] == "/ca.pem"
        jaas = props[f"{role}sasl.jaas.config"]
        assert "ScramLoginModule required" in jaas and f'password="{SECRET}"' in jaas
        assert f"{role}sasl.password" not in props


def test_a_real_client_receives_them(broker_settings: Settings) -> None:
    """librdkafka itself sees the user's property (it names one it does not know)."""
    settings = broker_settings.model_copy(update={"kafka_properties": {"no.such.property": "1"}})
    for build in (
        lambda: Producer(clients.producer_config(settings)),
        lambda: AdminClient(clients.base_config(settings)),
    ):
        with pytest.raises(KafkaException, match=r"no\.such\.property"):
            build()


@pytest.mark.kafka
def test_cli_takes_the_file_and_refuses_an_owned_property(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    config_file = tmp_path / "client.properties"
    config_file.write_text("security.protocol=PLAINTEXT\nclient.id=from-the-file\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
    env.update(
        SCHEDULERSTREAM_BOOTSTRAP_SERVERS=kafka_settings.bootstrap_servers,
        SCHEDULERSTREAM_TOPIC_PREFIX=kafka_settings.topic_prefix,
        SCHEDULERSTREAM_PARTITIONS="2",
        SCHEDULERSTREAM_KAFKA_CONFIG_FILE=str(config_file),
    )
    command = [sys.executable, "-m", "schedulerstream", "topics", "apply"]
    ok = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    env["SCHEDULERSTREAM_KAFKA_NO_SUCH_PROPERTY"] = "1"
    unknown = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert unknown.returncode != 0 and "no.such.property" in unknown.stderr
    del env["SCHEDULERSTREAM_KAFKA_NO_SUCH_PROPERTY"]
    env["SCHEDULERSTREAM_KAFKA_ENABLE_AUTO_COMMIT"] = "true"
    owned = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert owned.returncode == 1
    assert "SCHEDULERSTREAM_KAFKA_ENABLE_AUTO_COMMIT" in owned.stderr
    assert "'enable.auto.commit'" in owned.stderr and "Traceback" not in owned.stderr
