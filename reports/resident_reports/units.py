"""Time units: Google Benchmark's ``time_unit`` values, and display of durations."""

from collections.abc import Iterable

SECONDS_PER_UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
"""Seconds in one Google Benchmark ``time_unit``."""

_DISPLAY_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def display_unit(seconds: Iterable[float]) -> tuple[str, float]:
    """Return ``(label, seconds_per_unit)``: the largest unit in which the smallest of
    ``seconds`` is at least 1 (nanoseconds if none is). ``seconds`` must not be empty."""
    smallest = min(seconds)
    for label, scale in _DISPLAY_UNITS:
        if smallest >= scale:
            return label, scale
    return _DISPLAY_UNITS[-1]


def format_duration(seconds: float) -> str:
    """Format a duration with 3 significant digits in its own display unit: '12.3 ms'."""
    label, scale = display_unit([seconds])
    return f"{seconds / scale:.3g} {label}"


def format_percent(fraction: float, signed: bool = True) -> str:
    """Format a fraction as a percentage with one decimal: 0.052 -> '+5.2%'."""
    return f"{fraction * 100:+.1f}%" if signed else f"{fraction * 100:.1f}%"


def format_count(value: float) -> str:
    """Format a counter value: whole numbers in full with thousands separators
    ('1,000,000'), others with 3 significant digits ('0.143')."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"


_BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def format_bytes(value: float) -> str:
    """Format a byte count in binary units: 262144000 -> '250 MiB', 8 -> '8 B'."""
    for label, size in _BYTE_UNITS:
        if value >= size:
            return f"{value / size:.3g} {label}"
    return f"{value:.3g} B"
