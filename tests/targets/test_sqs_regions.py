"""Which SQS regions get a client: botocore's regions, or any once an endpoint is configured
(environment or shared config file, as botocore looks them up)."""

from __future__ import annotations

from pathlib import Path

import botocore.session
import pytest

from schedulerstream.sqs_regions import region_refusal


@pytest.fixture
def aws_home(real_aws: Path) -> Path:
    """The shared config file, no endpoint anywhere."""
    return real_aws


def refusal(region: str) -> str | None:
    return region_refusal(region, botocore.session.Session())  # reads the config file now


def test_a_region_botocore_knows_goes_and_another_is_refused_naming_it(aws_home: Path) -> None:
    assert refusal("eu-west-1") is None
    reason = refusal("us-east1")
    assert reason is not None and reason.startswith("'us-east1' is not an SQS region")


def test_an_endpoint_in_the_environment_takes_any_region(
    aws_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9324")
    assert refusal("elasticmq") is None


@pytest.mark.parametrize(
    "config",
    [
        "[default]\nendpoint_url = http://127.0.0.1:9324\n",
        "[default]\nservices = local\n[services local]\nsqs =\n  endpoint_url = http://127.0.0.1:9324\n",
    ],
    ids=["profile", "services-section"],
)
def test_an_endpoint_in_the_shared_config_file_takes_any_region(
    aws_home: Path, config: str
) -> None:
    aws_home.write_text(config)
    assert refusal("elasticmq") is None


def test_an_endpoint_for_another_service_does_not_count(aws_home: Path) -> None:
    aws_home.write_text(
        "[default]\nservices = local\n[services local]\ns3 =\n  endpoint_url = http://127.0.0.1:9000\n"
    )
    assert refusal("elasticmq") is not None


def test_configured_endpoints_can_be_ignored(
    aws_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9324")
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert refusal("elasticmq") is not None


def test_an_unreadable_config_file_is_named_and_known_regions_still_go(aws_home: Path) -> None:
    aws_home.write_text("[default]\nservices =\n  a = b\n")  # a section where a name belongs
    assert refusal("us-east-1") is None
    reason = refusal("elasticmq")
    assert reason is not None and "the AWS config that may set an endpoint is unreadable" in reason


def test_an_endpoint_in_the_environment_goes_with_a_profile_that_is_not_there(
    aws_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nowhere")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9324")
    assert refusal("elasticmq") is None


def test_a_config_file_that_does_not_parse_is_named_and_known_regions_still_go(
    aws_home: Path,
) -> None:
    aws_home.write_text("[default\nfoo")
    assert refusal("us-east-1") is None
    reason = refusal("elasticmq")
    assert reason is not None and "the AWS config that may set an endpoint is unreadable" in reason
