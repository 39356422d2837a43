"""Cron expression parsing: every syntax feature, and every error names its field."""

from __future__ import annotations

import pytest

from schedulerstream.errors import CronSyntaxError, ValidationError
from schedulerstream.timing import MACROS, parse_cron, parse_fields


def test_five_fields_default_seconds_to_zero() -> None:
    fields = parse_fields("5 4 3 2 1")
    assert fields.seconds == {0}
    assert fields.minutes == {5}
    assert fields.hours == {4}
    assert fields.days_of_month == {3}
    assert fields.months == {2}
    assert fields.days_of_week == {1}
    assert not fields.has_seconds


def test_six_fields_lead_with_seconds() -> None:
    fields = parse_fields("10 5 4 3 2 1")
    assert fields.has_seconds
    assert [fields.seconds, fields.minutes, fields.hours] == [{10}, {5}, {4}]
    assert [fields.days_of_month, fields.months, fields.days_of_week] == [{3}, {2}, {1}]


@pytest.mark.parametrize(
    ("minute_field", "expected"),
    [
        ("*", set(range(60))),
        ("*/5", set(range(0, 60, 5))),
        ("1-30/2", set(range(1, 31, 2))),
        ("5/15", {5, 20, 35, 50}),
        ("10-12", {10, 11, 12}),
        ("1,2,40-42,*/30", {0, 1, 2, 30, 40, 41, 42}),
        ("07", {7}),
        ("59/100", {59}),
        ("3-3", {3}),
    ],
)
def test_lists_ranges_and_steps(minute_field: str, expected: set[int]) -> None:
    assert parse_fields(f"{minute_field} * * * *").minutes == expected


def test_month_names_case_insensitive() -> None:
    assert parse_fields("0 0 1 JAN,mar,Dec *").months == {1, 3, 12}
    assert parse_fields("0 0 1 feb-APR *").months == {2, 3, 4}
    assert parse_fields("0 0 1 jan-dec/3 *").months == {1, 4, 7, 10}


def test_weekday_names_and_seven_is_sunday() -> None:
    assert parse_fields("0 0 * * SUN").days_of_week == {0}
    assert parse_fields("0 0 * * 7").days_of_week == {0}
    assert parse_fields("0 0 * * 0,7").days_of_week == {0}
    assert parse_fields("0 0 * * mon-FRI").days_of_week == {1, 2, 3, 4, 5}
    assert parse_fields("0 0 * * 5-7").days_of_week == {5, 6, 0}
    assert parse_fields("0 0 * * sat,Sun").days_of_week == {6, 0}
    assert parse_fields("0 0 * * */2").days_of_week == {0, 2, 4, 6}


def test_last_day_of_month() -> None:
    fields = parse_fields("0 0 L * *")
    assert fields.last_day_of_month
    assert fields.days_of_month == frozenset()
    assert fields.dom_restricted
    mixed = parse_fields("0 0 1,15,l * *")
    assert mixed.last_day_of_month
    assert mixed.days_of_month == {1, 15}


def test_question_mark_means_any_day() -> None:
    fields = parse_fields("0 0 12 ? * ?")
    assert fields.days_of_month == set(range(1, 32))
    assert not fields.dom_restricted
    assert not fields.dow_restricted


def test_nth_and_last_weekday_of_month() -> None:
    fields = parse_fields("0 9 ? * TUE#2,2#4,fri#5,7#1,5L,satl,0L")
    assert fields.nth_weekdays == {(2, 2), (2, 4), (5, 5), (0, 1)}
    assert fields.last_weekdays == {5, 6, 0}
    assert fields.days_of_week == frozenset()
    assert fields.dow_restricted
    assert not fields.dom_restricted


def test_plain_weekdays_combine_with_nth_and_last() -> None:
    fields = parse_fields("0 9 * * MON,WED-THU,FRI#3,SUNL")
    assert fields.days_of_week == {1, 3, 4}
    assert fields.nth_weekdays == {(5, 3)}
    assert fields.last_weekdays == {0}


def test_nearest_and_last_weekday_of_month() -> None:
    fields = parse_fields("0 9 1W,15w,LW,L,20-22 * ?")
    assert fields.nearest_weekdays == {1, 15}
    assert fields.last_weekday_of_month
    assert fields.last_day_of_month
    assert fields.days_of_month == {20, 21, 22}
    assert fields.dom_restricted
    assert not fields.dow_restricted
    assert parse_fields("0 9 lw * *").last_weekday_of_month


def test_day_rules_take_part_in_equality() -> None:
    assert parse_fields("0 9 * * TUE#2") != parse_fields("0 9 * * TUE#3")
    assert parse_fields("0 9 * * TUE#2") == parse_fields("0 9 ? * 2#2")
    assert parse_fields("0 9 15W * *") != parse_fields("0 9 15 * *")
    assert parse_fields("0 9 * * 0L") == parse_fields("0 9 * * 7L")


@pytest.mark.parametrize(
    ("macro", "equivalent"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_macros(macro: str, equivalent: str) -> None:
    assert parse_fields(macro) == parse_fields(equivalent)
    assert MACROS[macro.lower()] == equivalent


@pytest.mark.parametrize(
    ("expression", "fixed"),
    [
        ("30 2 * * *", True),
        ("0 1-3 * * *", True),
        ("0,30 2,3 * * *", True),
        ("*/15 * * * *", False),
        ("0 * * * *", False),
        ("0 */2 * * *", False),
        ("* 2 * * *", False),
        ("0 30 2 * * *", True),
        ("* 30 2 * * *", False),
        ("*/10 30 2 * * *", False),
        ("@hourly", False),
        ("@daily", True),
        ("@midnight", True),
        ("@weekly", True),
        ("@monthly", True),
        ("@yearly", True),
    ],
)
def test_fixed_time(expression: str, fixed: bool) -> None:
    assert parse_fields(expression).is_fixed_time is fixed
    assert parse_cron(expression).is_fixed_time is fixed


@pytest.mark.parametrize(
    ("expression", "dom", "dow"),
    [
        ("0 0 * * *", False, False),
        ("0 0 1 * *", True, False),
        ("0 0 * * 1", False, True),
        ("0 0 1 * 1", True, True),
        ("0 0 */2 * 1", False, True),
        ("0 0 L * 5", True, True),
    ],
)
def test_restricted_day_fields(expression: str, dom: bool, dow: bool) -> None:
    fields = parse_fields(expression)
    assert (fields.dom_restricted, fields.dow_restricted) == (dom, dow)
    assert fields.day_rule_is_or is (dom and dow)


def test_whitespace_is_flexible() -> None:
    assert parse_fields("  0\t9  *   * 1-5 ") == parse_fields("0 9 * * 1-5")


@pytest.mark.parametrize(
    ("expression", "field", "fragment"),
    [
        ("", "expression", "empty"),
        ("   ", "expression", "empty"),
        ("* * * *", "expression", "got 4"),
        ("* * * * * * *", "expression", "got 7"),
        ("@reboot", "expression", "'@reboot'"),
        ("@every 5m", "expression", "'@every 5m'"),
        ("61 * * * *", "minute", "'61' is out of range 0-59"),
        ("60 * * * * *", "second", "'60' is out of range 0-59"),
        ("0 60 * * * *", "minute", "'60' is out of range 0-59"),
        ("0 24 * * *", "hour", "'24' is out of range 0-23"),
        ("0 0 0 * *", "day_of_month", "'0' is out of range 1-31"),
        ("0 0 32 * *", "day_of_month", "'32' is out of range 1-31"),
        ("0 0 * 13 *", "month", "'13' is out of range 1-12"),
        ("0 0 * 0 *", "month", "'0' is out of range 1-12"),
        ("0 0 * * 8", "day_of_week", "'8' is out of range 0-7"),
        ("0 0 * FOO *", "month", "'FOO'"),
        ("0 0 * * MONDAY", "day_of_week", "'MONDAY'"),
        ("0 0 * * JAN", "day_of_week", "'JAN'"),
        ("0 0 * MON *", "month", "'MON'"),
        ("0 MON * * *", "hour", "'MON'"),
        ("abc * * * *", "minute", "'abc'"),
        ("-1 * * * *", "minute", "''"),
        ("*/0 * * * *", "minute", "step '0'"),
        ("*/x * * * *", "minute", "'x' is not a valid step"),
        ("1-2/ * * * *", "minute", "'' is not a valid step"),
        ("30-10 * * * *", "minute", "'30-10'"),
        ("0 0 * * FRI-MON", "day_of_week", "'FRI-MON'"),
        ("1,,2 * * * *", "minute", "empty list element"),
        ("0 L * * *", "hour", "'L'"),
        ("0 0 * * L", "day_of_week", "'L'"),
        ("0 0 L-2 * *", "day_of_month", "'L'"),
        ("0 0 L/2 * *", "day_of_month", "'L'"),
        ("0 0 WL * *", "day_of_month", "'WL'"),
        ("0 0 W * *", "day_of_month", "'W' needs a day"),
        ("0 0 1-5W * *", "day_of_month", "'1-5W': 'W' takes a single day"),
        ("0 0 */2W * *", "day_of_month", "'*/2W': 'W' takes a single day"),
        ("0 0 0W * *", "day_of_month", "'0' is out of range 1-31"),
        ("0 0 32W * *", "day_of_month", "'32' is out of range 1-31"),
        ("0 0 FRIW * *", "day_of_month", "'FRIW'"),
        ("0 0 15W * TUE#2W", "day_of_week", "'TUE#2W'"),
        ("? * * * *", "minute", "'?'"),
        ("0 0 1,? * *", "day_of_month", "'?'"),
        ("0 0 1 * 1#6", "day_of_week", "'1#6': the occurrence after '#' must be 1-5"),
        ("0 0 1 * 1#0", "day_of_week", "must be 1-5"),
        ("0 0 1 * 1#", "day_of_week", "must be 1-5"),
        ("0 0 1 * 1#x", "day_of_week", "must be 1-5"),
        ("0 0 1 * #2", "day_of_week", "'#2': '#' (e.g. TUE#2) takes a single weekday"),
        ("0 0 1 * MON-FRI#2", "day_of_week", "'MON-FRI#2': '#' (e.g. TUE#2) takes a single"),
        ("0 0 1 * */2#1", "day_of_week", "takes a single weekday"),
        ("0 0 1 * 8#1", "day_of_week", "'8' is out of range 0-7"),
        ("0 0 1 * JAN#1", "day_of_week", "'JAN'"),
        ("0 0 1 * MON-FRIL", "day_of_week", "'MON-FRIL': 'L' (e.g. FRIL, 5L) takes a single"),
        ("0 0 1 * ?L", "day_of_week", "takes a single weekday"),
        ("0 0 1 * 8L", "day_of_week", "'8' is out of range 0-7"),
        ("0 0 1 * FRIDAYL", "day_of_week", "'FRIDAY'"),
        ("0 0 1 5#2 *", "month", "'5#2'"),
        ("0 0 1 5L *", "month", "'5L'"),
        ("0 5W 1 * *", "hour", "'5W'"),
        ("0 0 ١ * *", "day_of_month", "'١'"),
    ],
)
def test_errors_name_field_and_value(expression: str, field: str, fragment: str) -> None:
    with pytest.raises(CronSyntaxError) as caught:
        parse_fields(expression)
    assert caught.value.field == field
    assert fragment in caught.value.message
    assert isinstance(caught.value, ValidationError)


def test_out_of_range_message_is_exact() -> None:
    with pytest.raises(CronSyntaxError) as caught:
        parse_cron("61 * * * *")
    assert (caught.value.field, caught.value.message) == ("minute", "'61' is out of range 0-59")
