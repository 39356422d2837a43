"""Policy values are defined once (contracts/policies.py) and spelled as the wire spells them."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from schedulerstream.api.schemas import JobBody
from schedulerstream.contracts import policies
from schedulerstream.model import JobDefinition, ScheduleSpec
from schedulerstream.resources import schema_dir


def _avro_field(schema: str, name: str) -> dict[str, Any]:
    document = json.loads((schema_dir() / f"io.schedulerstream.{schema}.avsc").read_text())
    fields: list[dict[str, Any]] = document["fields"]
    return next(f for f in fields if f["name"] == name)


@pytest.mark.parametrize(
    ("schema", "field", "values"),
    [
        ("JobDefinition", "misfire_policy", policies.MisfirePolicy),
        ("JobDefinition", "overlap_policy", policies.OverlapPolicy),
        ("JobDefinition", "delivery", policies.DeliveryMode),
        ("ScheduleSpec", "dst_gap", policies.DstGap),
        ("ScheduleSpec", "dst_repeat", policies.DstRepeat),
    ],
)
def test_the_avro_schemas_document_the_same_values(schema: str, field: str, values: Any) -> None:
    avro = _avro_field(schema, field)
    assert avro["type"] == "string"
    assert avro["doc"].split(" | ") == list(get_args(values))
    assert avro["default"] in get_args(values)


@pytest.mark.parametrize("model", [JobDefinition, JobBody])
def test_the_model_and_the_api_offer_the_same_values(model: Any) -> None:
    properties = model.model_json_schema()["properties"]
    assert set(properties["misfire_policy"]["enum"]) == policies.MISFIRE_POLICIES
    assert set(properties["overlap_policy"]["enum"]) == policies.OVERLAP_POLICIES
    assert set(properties["delivery"]["enum"]) == policies.DELIVERY_MODES


def test_the_schedule_offers_the_dst_values() -> None:
    properties = ScheduleSpec.model_json_schema()["properties"]
    assert tuple(properties["dst_gap"]["enum"]) == policies.DST_GAP_VALUES
    assert tuple(properties["dst_repeat"]["enum"]) == policies.DST_REPEAT_VALUES
