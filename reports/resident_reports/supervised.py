"""The run report's supervised-models section: for each model, resident's graph-replayed train
step against the host-fed step and the same model written plainly in PyTorch (eager and
compiled, bench/pytorch/supervised_models.py), resident's epoch against the host-fed epoch, a
sampling model's forecast sampler against PyTorch's, and the peak device memory each row
reports.

A row the run lacks is shown as not measured with the reason the run records: an errored row's
message, or the PyTorch script's notes in the context (``pytorch_skipped``: no PyTorch row at
all, and why; ``pytorch_not_measured``: row key -> why), or else that the run has no such row.
"""

from collections.abc import Mapping

from .stats import RunSummary, Summary
from .tables import markdown_table
from .units import format_bytes, format_duration, format_percent

STEP_GROUP, EPOCH_GROUP, SAMPLE_GROUP = "supervised_step", "supervised_epoch", "supervised_sample"
GROUPS = (STEP_GROUP, EPOCH_GROUP, SAMPLE_GROUP)
RESIDENT = "resident"
PEAK_COUNTER = "peak_device_bytes"
SKIPPED_NOTE, NOT_MEASURED_NOTE, VERSION_NOTE = (
    "pytorch_skipped", "pytorch_not_measured", "pytorch_version")

# (label, group, variant, optional): the rows of a model's table, in order. An optional row is
# shown only when the run measured it, or errored on it, or notes why not.
_ROWS = (
    ("train step, resident (graph-replayed)", STEP_GROUP, RESIDENT, False),
    ("train step, host-fed", STEP_GROUP, "host_fed", False),
    ("train step, PyTorch eager", STEP_GROUP, "pytorch_eager", False),
    ("train step, PyTorch compiled", STEP_GROUP, "pytorch_compile", False),
    ("train step, PyTorch compiled (reduce-overhead)", STEP_GROUP, "pytorch_compile_ro", True),
    ("epoch, resident", EPOCH_GROUP, RESIDENT, False),
    ("epoch, host-fed", EPOCH_GROUP, "host_fed", False),
    ("sampling a forecast, resident (one graph)", SAMPLE_GROUP, RESIDENT, True),
    ("sampling a forecast, PyTorch eager", SAMPLE_GROUP, "pytorch_eager", True),
    ("sampling a forecast, PyTorch compiled", SAMPLE_GROUP, "pytorch_compile", True),
)

HEADING = "## Supervised models"
NONE_LINE = "No supervised model rows in this run."


def row_key(group: str, variant: str, model: str) -> str:
    """The benchmark key of one model's row."""
    return f"{group}/{variant}/model:{model}"


def supervised_section(summary: RunSummary, context: Mapping[str, object]) -> str:
    """One table per model with a row in either supervised group (or a PyTorch note)."""
    models = _models(summary, context)
    pytorch = _pytorch_line(context)
    if not models:
        return "\n\n".join([HEADING, NONE_LINE, *([pytorch] if pytorch else [])])
    parts = [HEADING,
             "Medians of the repetitions; spread = (max − min) / median. \"resident vs this "
             "row\" is this row's median over resident's median of the same kind (train step, "
             "epoch or sampling): how many times faster resident is. Peak device memory is the "
             f"row's `{PEAK_COUNTER}` counter (PyTorch: torch.cuda.max_memory_allocated over the "
             "timed steps).", *([pytorch] if pytorch else [])]
    parts += [_model_table(model, summary, context) for model in models]
    return "\n\n".join(parts)


def _models(summary: RunSummary, context: Mapping[str, object]) -> list[str]:
    """Model names of the supervised rows (measured, errored or noted), in first-seen order."""
    keys = [*summary.measured, *summary.errors, *_not_measured_notes(context)]
    models: dict[str, None] = {}
    for key in keys:
        group, _, rest = key.partition("/")
        param = rest.partition("/")[2]
        if group in GROUPS and param.startswith("model:"):
            models.setdefault(param.removeprefix("model:"), None)
    return list(models)


def _pytorch_line(context: Mapping[str, object]) -> str:
    """What the run says of its PyTorch rows, or '' when it says nothing."""
    if SKIPPED_NOTE in context:
        return f"PyTorch rows: skipped ({_clean(context[SKIPPED_NOTE])})."
    if VERSION_NOTE in context:
        cuda = context.get("pytorch_cuda_version", "?")
        return f"PyTorch rows: torch {context[VERSION_NOTE]} (CUDA {cuda})."
    return ""


def _model_table(model: str, summary: RunSummary, context: Mapping[str, object]) -> str:
    references = {group: summary.measured.get(row_key(group, RESIDENT, model))
                  for group in GROUPS}
    rows = []
    for label, group, variant, optional in _ROWS:
        key = row_key(group, variant, model)
        measured = summary.measured.get(key)
        if measured is None:
            if optional and key not in summary.errors and key not in _not_measured_notes(context):
                continue
            reason = _missing_reason(key, variant, summary, context)
            rows.append([label, f"not measured ({reason})", "—", "—", "—"])
            continue
        rows.append([label, format_duration(measured.median_s),
                     format_percent(measured.spread, signed=False),
                     _versus(measured, references[group], variant),
                     _memory(measured)])
    table = markdown_table(["row", "median", "spread", "resident vs this row",
                            "peak device memory"], rows, align="lrrrr")
    return f"### {model}\n\n{table}"


def _missing_reason(key: str, variant: str, summary: RunSummary,
                    context: Mapping[str, object]) -> str:
    """Why ``key`` has no measurement, as far as the run tells."""
    if key in summary.errors:
        return f"errored: {_clean(summary.errors[key])}"
    if not variant.startswith("pytorch_"):
        return "no row in this run"
    notes = _not_measured_notes(context)
    if key in notes:
        return _clean(notes[key])
    if SKIPPED_NOTE in context:
        return f"PyTorch rows skipped: {_clean(context[SKIPPED_NOTE])}"
    if VERSION_NOTE in context:
        return "the PyTorch script was not asked for this variant"
    return "no row in this run: the PyTorch script did not run or left no note"


def _not_measured_notes(context: Mapping[str, object]) -> Mapping[str, object]:
    notes = context.get(NOT_MEASURED_NOTE)
    return notes if isinstance(notes, Mapping) else {}


def _versus(row: Summary, reference: Summary | None, variant: str) -> str:
    """Resident's speed relative to ``row``: '3.10× faster', '1.25× slower'."""
    if variant == RESIDENT:
        return "(reference)"
    if reference is None:
        return "— (no resident row)"
    ratio = row.median_s / reference.median_s
    return f"{ratio:.2f}× faster" if ratio >= 1 else f"{1 / ratio:.2f}× slower"


def _memory(row: Summary) -> str:
    value = row.counters.get(PEAK_COUNTER)
    return format_bytes(value) if value is not None and value == value else "not reported"


def _clean(text: object) -> str:
    """One line of text for a table cell."""
    return " ".join(str(text).split())
