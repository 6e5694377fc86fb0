import pytest

from resident_reports.tables import markdown_table, text_table
from resident_reports.units import (display_unit, format_bytes, format_count, format_duration,
                                    format_percent)


@pytest.mark.parametrize("seconds, text", [
    (2.5, "2.5 s"), (0.0121, "12.1 ms"), (40e-6, "40 µs"), (3e-9, "3 ns"), (5e-12, "0.005 ns"),
])
def test_format_duration_picks_the_unit(seconds, text):
    assert format_duration(seconds) == text


def test_display_unit_follows_the_smallest_value():
    assert display_unit([40e-6, 2.0]) == ("µs", 1e-6)


@pytest.mark.parametrize("value, text", [(262144000, "250 MiB"), (8, "8 B"), (0, "0 B"),
                                         (1536, "1.5 KiB"), (3 * 2**30, "3 GiB")])
def test_format_bytes(value, text):
    assert format_bytes(value) == text


def test_format_count_and_percent():
    assert format_count(1_000_000.0) == "1,000,000"
    assert format_count(1 / 7) == "0.143"
    assert format_percent(0.052) == "+5.2%"
    assert format_percent(-0.25) == "-25.0%"
    assert format_percent(0.2, signed=False) == "20.0%"


def test_text_table_aligns_columns():
    table = text_table(["name", "value"], [["a", "1"], ["long-name", "100"]])
    assert table.splitlines() == ["name       value",
                                  "---------  -----",
                                  "a              1",
                                  "long-name    100"]


def test_markdown_table_escapes_pipes_and_aligns():
    table = markdown_table(["k", "v"], [["a|b", "1"]], align="lr")
    assert table.splitlines() == ["| k | v |", "|---|---:|", "| a\\|b | 1 |"]
