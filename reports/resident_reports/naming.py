"""Benchmark names: ``<group>/<variant>[/<param>:<value>...]`` plus Google Benchmark
suffixes (``manual_time``, ``repeats:N``, ...), which are dropped when parsing."""

import math
import re
from dataclasses import dataclass

_SUFFIX_WORDS = frozenset({"manual_time", "real_time", "process_time"})
_SUFFIX_PARAMS = frozenset({"repeats", "min_time", "min_warmup_time", "iterations", "threads"})


@dataclass(frozen=True)
class BenchName:
    """A parsed benchmark name. ``params`` keeps the order of the name; values are the
    strings written in the name."""

    group: str
    variant: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        """The name without Google Benchmark suffixes; identifies a benchmark across runs."""
        return "/".join([self.group, self.variant, *self.param_parts()])

    def param_parts(self) -> list[str]:
        """The params as ``'name:value'`` strings, in name order."""
        return [f"{param}:{value}" for param, value in self.params]

    def numeric_params(self) -> dict[str, float]:
        """The params whose value parses as a number, by name."""
        return {param: number for param, value in self.params
                if (number := _as_number(value)) is not None}

    def without_param(self, param: str) -> tuple[tuple[str, str], ...]:
        """The params other than ``param``."""
        return tuple(item for item in self.params if item[0] != param)


def parse_name(run_name: str) -> BenchName:
    """Parse a Google Benchmark ``run_name``. Raises ``ValueError`` when the name has no
    variant, has an empty component, or has a component after the variant that is neither
    a Google Benchmark suffix nor ``param:value``."""
    parts = run_name.split("/")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f'"{run_name}" is not <group>/<variant>[/<param>:<value>...]')
    group, variant, *rest = parts
    params = []
    for part in rest:
        if _is_suffix(part):
            continue
        param, sep, value = part.partition(":")
        if not sep or not param or not value:
            raise ValueError(f'"{run_name}": component "{part}" is not <param>:<value>')
        params.append((param, value))
    return BenchName(group, variant, tuple(params))


def _as_number(value: str) -> float | None:
    """``value`` as a finite number, or ``None`` (``'graph'``, ``'nan'``)."""
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _is_suffix(part: str) -> bool:
    """Whether a name component is one Google Benchmark appends."""
    param, sep, _ = part.partition(":")
    return part in _SUFFIX_WORDS or (bool(sep) and param in _SUFFIX_PARAMS)


def slug(text: str) -> str:
    """A file-name-safe form of ``text``: runs of other characters become '_'."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_")
