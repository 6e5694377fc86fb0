"""Tables as fixed-width text (gate output) and as Markdown (report summaries).

``align`` is one letter per column, ``'l'`` (left) or ``'r'`` (right); by default the first
column is left-aligned and the others right-aligned. Cells must already be strings."""

from collections.abc import Mapping, Sequence
from pathlib import Path

from .loader import CONTEXT_LABELS, Run

SUMMARY_MD = "summary.md"
"""The file name of a report's Markdown summary."""


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
               align: str | None = None) -> str:
    """A fixed-width table with a dashed rule under the header."""
    align = align or _default_align(headers)
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) if side == "l" else cell.rjust(width)
                         for cell, width, side in zip(cells, widths, align)).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                   align: str | None = None) -> str:
    """A GitHub Markdown table; ``|`` inside a cell is escaped."""
    align = align or _default_align(headers)

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    rule = "|" + "".join("---|" if side == "l" else "---:|" for side in align)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def _default_align(headers: Sequence[str]) -> str:
    """The first column left, the others right."""
    return "l" + "r" * (len(headers) - 1)


def context_table(runs: Mapping[str, Run]) -> str:
    """A Markdown table of the ``CONTEXT_LABELS`` fields of each run, one column per run
    (headed by its key in ``runs``); fields no run has are left out, missing ones are '—'."""
    rows = [[label, *(str(run.context.get(field, "—")) for run in runs.values())]
            for field, label in CONTEXT_LABELS.items()
            if any(field in run.context for run in runs.values())]
    return markdown_table(["context", *runs], rows, align="l" * (len(runs) + 1))


def write_summary(out_dir: Path, blocks: Sequence[str]) -> Path:
    """Write Markdown ``blocks``, separated by blank lines, to ``out_dir/SUMMARY_MD``;
    return its path."""
    path = out_dir / SUMMARY_MD
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path
