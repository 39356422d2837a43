"""``schedulerstream cron next`` through the real click group."""

from __future__ import annotations

import json

from click.testing import CliRunner

from schedulerstream.cli import main


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["cron", "next", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_output() -> None:
    code, out, _ = run(
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2024-03-09T12:00:00Z",
        "--count",
        "2",
        "--json",
    )
    assert code == 0
    assert json.loads(out) == [
        {
            "utc": "2024-03-10T07:00:00Z",
            "local": "2024-03-10T03:00:00-04:00",
            "note": "02:30 does not exist (DST gap); fired at 03:00",
        },
        {"utc": "2024-03-11T06:30:00Z", "local": "2024-03-11T02:30:00-04:00", "note": ""},
    ]


def test_table_output() -> None:
    code, out, _ = run(
        "30 1 * * *", "--tz", "America/New_York", "--after", "2024-11-03T00:00Z", "--count", "2"
    )
    assert code == 0
    lines = out.splitlines()
    assert (
        lines[0]
        == "30 1 * * * in America/New_York (fixed-time; dst_gap=fire_after, dst_repeat=first)"
    )
    assert lines[1].split() == ["UTC", "LOCAL", "NOTE"]
    assert lines[2].startswith(
        "2024-11-03T05:30:00Z  2024-11-03T01:30:00-04:00  01:30 occurs twice"
    )
    assert lines[3].rstrip() == "2024-11-04T06:30:00Z  2024-11-04T01:30:00-05:00"


def test_policy_options_and_separate_field_arguments() -> None:
    code, out, _ = run(
        "30",
        "1",
        "*",
        "*",
        "*",
        "--tz",
        "America/New_York",
        "--after",
        "2024-11-03T00:00:00",
        "--count",
        "2",
        "--json",
        "--dst-repeat",
        "both",
    )
    assert code == 0
    assert [e["utc"] for e in json.loads(out)] == ["2024-11-03T05:30:00Z", "2024-11-03T06:30:00Z"]
    code, out, _ = run(
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2024-03-10T00:00Z",
        "--count",
        "1",
        "--json",
        "--dst-gap",
        "skip",
    )
    assert code == 0
    assert json.loads(out)[0]["utc"] == "2024-03-11T06:30:00Z"


def test_default_after_is_now_and_count_is_five() -> None:
    code, out, _ = run("* * * * *", "--json")
    assert code == 0
    assert len(json.loads(out)) == 5


def test_bad_expression_names_field_and_value() -> None:
    code, out, err = run("61 * * * *")
    assert code == 2
    assert out == ""
    assert "minute" in err and "'61' is out of range 0-59" in err


def test_unknown_zone() -> None:
    code, _, err = run("0 * * * *", "--tz", "Mars/Olympus")
    assert code == 2
    assert "timezone" in err and "'Mars/Olympus'" in err


def test_bad_option_values_exit_2() -> None:
    assert run("0 * * * *", "--after", "yesterday")[0] == 2
    assert run("0 * * * *", "--dst-gap", "later")[0] == 2
    assert run("0 * * * *", "--count", "0")[0] == 2
    assert run()[0] == 2


def test_never_firing_expression() -> None:
    code, out, _ = run("0 0 30 2 *", "--after", "2024-01-01T00:00:00Z")
    assert code == 0
    assert "no instants after 2024-01-01T00:00:00+00:00" in out
    code, out, _ = run("0 0 30 2 *", "--json")
    assert json.loads(out) == []


def test_or_and_exclude_table() -> None:
    code, out, _ = run(
        "0 9 * * MON-FRI",
        "--or",
        "0 12 * * SAT",
        "--or",
        "30 2 * * SUN#2",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-05T12:00:00Z",
        "--exclude",
        "2026-03-09",
        "--exclude",
        "2026-03-11..2026-03-12",
        "--count",
        "6",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[:4] == [
        "[1] 0 9 * * MON-FRI in America/New_York "
        "(fixed-time; dst_gap=fire_after, dst_repeat=first)",
        "[2] 0 12 * * SAT (fixed-time; dst_gap=fire_after, dst_repeat=first)",
        "[3] 30 2 * * SUN#2 (fixed-time; dst_gap=fire_after, dst_repeat=first)",
        "except on 2026-03-09, 2026-03-11..2026-03-12",
    ]
    assert lines[4].split() == ["UTC", "LOCAL", "EXPR", "NOTE"]
    assert [line.split()[1:3] for line in lines[5:]] == [
        ["2026-03-05T09:00:00-05:00", "1"],
        ["2026-03-06T09:00:00-05:00", "1"],
        ["2026-03-07T12:00:00-05:00", "2"],
        ["2026-03-08T03:00:00-04:00", "3"],
        ["2026-03-10T09:00:00-04:00", "1"],
        ["2026-03-13T09:00:00-04:00", "1"],
    ]
    assert lines[8].endswith("02:30 does not exist (DST gap); fired at 03:00")


def test_or_json_names_the_expressions_firing() -> None:
    code, out, _ = run(
        "0 * * * *", "--or", "*/30 * * * *", "--after", "2026-01-01T00:00:00Z", "--count", "2",
        "--json",
    )  # fmt: skip
    assert code == 0
    assert json.loads(out) == [
        {"utc": "2026-01-01T00:30:00Z", "local": "2026-01-01T00:30:00+00:00", "note": "",
         "expressions": ["*/30 * * * *"]},
        {"utc": "2026-01-01T01:00:00Z", "local": "2026-01-01T01:00:00+00:00", "note": "",
         "expressions": ["0 * * * *", "*/30 * * * *"]},
    ]  # fmt: skip


def test_nth_weekday_preview() -> None:
    code, out, _ = run("0 18 * * TUE#2", "--after", "2026-01-01T00:00:00Z", "--count", "2")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[2:]] == [
        "2026-01-13T18:00:00Z",
        "2026-02-10T18:00:00Z",
    ]


def test_errors_in_or_and_exclude_name_them() -> None:
    code, _, err = run("0 9 * * MON", "--or", "0 9 * * MON#7")
    assert code == 2
    assert err.startswith("error: --or '0 9 * * MON#7': day_of_week: 'MON#7': the occurrence")
    code, _, err = run("0 9 * * MON", "--exclude", "2026-02-30")
    assert code == 2
    assert "error: exclude: '2026-02-30' is not a date (YYYY-MM-DD)" in err
    code, _, err = run("0 9 * * MON", "--exclude", "2026-03-19..2026-03-09")
    assert code == 2
    assert "ends before it starts" in err
