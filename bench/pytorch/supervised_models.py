#!/usr/bin/env python3
"""Time one train step of each supervised model written plainly in PyTorch (bench/pytorch/
models.py), eager and with torch.compile, on the GPU, as Google Benchmark JSON rows beside
resident's own rows.

A step is what resident's supervised step does: zero the grads, forward, MSE loss, backward,
global-norm clip at 1.0, AdamW (lr 1e-3; weight decay 0.01 on the parameters a model's decays()
names, the weight matrices, 0 on the rest); batch 256 windows of 64 x 32 features, one output,
fp32 with TF32 off, the batch already on the GPU. Each row runs in its own process (no compile
cache, CUDA graph pool or memory peak carried from another row). Warm-up steps come first
(torch.compile compiles there; a graph compiled during the timed steps is counted in the row's
``recompiles`` counter); then repetitions of timed steps, each step bracketed by CUDA events on
an idle GPU (the window holds the host's launches, as resident's rows do); a repetition's time
is the mean of its steps. Rows: ``supervised_step/pytorch_<variant>/model:<name>``, time in
microseconds, one row per repetition plus median/min/max, counter ``peak_device_bytes``
(torch.cuda.max_memory_allocated over the timed steps: parameters, grads, AdamW state, batch
and activations).

A model with its own training loss (diffusion: the epsilon-MSE at drawn t and noise,
``training_loss``) uses it in place of the MSE of its forward. A model that samples forecasts
(``sample``) also gets sampling rows ``supervised_sample/pytorch_<variant>/model:<name>``: its
T-step ancestral sampler for ``--batch`` windows, one sample each, averaged, under no_grad (the
compiled variants compile one sampler step, the timestep a tensor so one graph serves all T).

Variants: eager; compile (torch.compile, default mode, of the forward + loss and of clip +
AdamW); compile_ro (the same with mode="reduce-overhead", CUDA graphs; not in the default set).

  bench/pytorch/supervised_models.py --out FILE.json        # a file of its own
  bench/pytorch/supervised_models.py --merge-into DIR/bench.json [--budget S]
                                                            # the main job's hook (run-benches)
  bench/pytorch/supervised_models.py --merge-into DIR/bench.json --missing
                                                            # the rows that run left unmeasured

Row order: every eager row first (step rows, then samplers), then the compiled ones, each
group in the model registry's order; so a budget cut leaves out compiled rows first (their
compile alone takes tens of seconds to minutes). ``--budget S`` gives all rows together S
seconds: each row's timeout is the smaller of --row-timeout and what is left, and a row that
would start with under 10 s left is not run; its reason in ``pytorch_not_measured`` says so
and names the command that measures it later (``--missing``: only the rows a run's context
lists as not measured and its benchmarks lack; the others keep their reasons).
With --merge-into the rows are merged into that file by reports/merge, each row's files are
kept under DIR/rows/ (RESIDENT_BENCH_RESUME=1 keeps a row already there), rows whose names match
RESIDENT_BENCH_SKIP (a regular expression, re.search) are left out, and the file's context
records why a row is missing: ``pytorch_skipped`` (no row at all: torch not importable, no
GPU) or ``pytorch_not_measured`` (row key -> reason: skipped, compile failed, timed out), which
reports/render shows in place of the row.

Where torch is not importable or sees no GPU the script writes no rows, prints one line with
the reason and exits 0. Exit status 2: bad usage or an unreadable --merge-into file.
"""

import argparse
import datetime
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

PROG = "supervised_models"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

BATCH, WINDOW, FEATURES, OUTPUTS = 256, 64, 32, 1
LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM = 1e-3, 0.01, 1.0
GROUP = "supervised_step"
SAMPLE_GROUP, SAMPLE_PREFIX = "supervised_sample", "sample_"
"""A variant named sample_<variant> measures the model's sampler (its row in SAMPLE_GROUP)."""
VARIANTS = {"eager": None, "compile": "default", "compile_ro": "reduce-overhead"}
"""Variant -> torch.compile mode (None: eager)."""
DEFAULT_VARIANTS = ("eager", "compile")
PEAK_COUNTER = "peak_device_bytes"
ROWS_FILE = "pytorch_supervised.json"


def row_key(model: str, variant: str) -> str:
    """The benchmark key of a row: supervised_step/pytorch_<variant>/model:<name>, or
    supervised_sample/pytorch_<variant>/model:<name> for the variant sample_<variant>."""
    if variant.startswith(SAMPLE_PREFIX):
        return f"{SAMPLE_GROUP}/pytorch_{variant[len(SAMPLE_PREFIX):]}/model:{model}"
    return f"{GROUP}/pytorch_{variant}/model:{model}"


MIN_ROW_SECONDS = 10.0
"""Under a budget, a row that would start with less than this left is not run."""


def planned_rows(models: list[str], variants: list[str],
                 samplers: list[str]) -> list[tuple[str, str]]:
    """(model, variant) in the order rows run: eager variants before compiled ones; within
    each, the step rows of every model, then the sampler rows of the models in ``samplers``;
    models in the given order."""
    order = sorted(variants, key=lambda v: VARIANTS[v] is not None)  # stable: eager first
    planned = []
    for variant in order:
        planned += [(m, variant) for m in models]
        planned += [(m, SAMPLE_PREFIX + variant) for m in models if m in samplers]
    return planned


def budget_spent_reason(budget: float) -> str:
    return (f"not run: the {budget:g} s budget for the PyTorch rows was spent; measure it "
            f"later with bench/pytorch/supervised_models.py --merge-into RUN/bench.json "
            f"--missing")


def missing_rows(bench: Path) -> tuple[set[str], dict]:
    """The row keys ``bench``'s context lists as not measured and its benchmarks lack, and
    the notes of the listed rows that stay as they are (those it already has are dropped)."""
    document = json.loads(bench.read_text())
    have = {"/".join(part for part in b.get("run_name", b.get("name", "")).split("/")
                     if not part.startswith("repeats:") and part != "manual_time")
            for b in document.get("benchmarks", [])}
    listed = document.get("context", {}).get("pytorch_not_measured", {}) or {}
    wanted = {key for key in listed if key not in have}
    return wanted, {key: why for key, why in listed.items() if key in wanted}


def main() -> int:
    args = parse_args()
    if args.child:
        return child_main(args)
    reason = torch_unavailable(args.device)
    if reason is not None:
        print(f"{PROG}: no PyTorch rows: {reason}")
        if args.merge_into:
            annotate(args.merge_into, {"pytorch_skipped": reason})
        return 0
    from models import MODELS  # noqa: E402  (needs torch)
    models = args.models.split(",") if args.models else list(MODELS)
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        print(f"{PROG}: unknown model {unknown[0]!r}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    if args.device == "cpu" and args.merge_into:
        print(f"{PROG}: --device cpu rows are for tests; not merged into a run", file=sys.stderr)
        return 2
    rows_dir = (args.merge_into.parent / "rows" if args.merge_into
                else Path(tempfile.mkdtemp(prefix="pytorch_rows_")))
    rows_dir.mkdir(parents=True, exist_ok=True)
    skip = os.environ.get("RESIDENT_BENCH_SKIP", "")
    planned = planned_rows(models, args.variants, [m for m in models if hasattr(MODELS[m],
                                                                                "sample")])
    kept_notes: dict = {}
    if args.missing:
        wanted, kept_notes = missing_rows(args.merge_into)
        planned = [(m, v) for m, v in planned if row_key(m, v) in wanted]
        print(f"{PROG}: --missing: {len(planned)} of the rows {args.merge_into} lacks")
    deadline = None if args.budget is None else time.monotonic() + args.budget
    rows, not_measured = [], {}
    for model, variant in planned:
        key = row_key(model, variant)
        if skip and re.search(skip, key):
            print(f"{PROG}: {key} skipped (RESIDENT_BENCH_SKIP)")
            not_measured[key] = "left out by RESIDENT_BENCH_SKIP"
            continue
        timeout = args.row_timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left < MIN_ROW_SECONDS:
                not_measured[key] = budget_spent_reason(args.budget)
                print(f"{PROG}: {key} not run: {not_measured[key]}")
                continue
            timeout = min(timeout, left)
        measured, reason = run_row(args, model, variant, rows_dir, timeout)
        if measured is None:
            print(f"{PROG}: {key} not measured: {reason}")
            not_measured[key] = reason
        else:
            rows.extend(measured)
    not_measured = {**kept_notes, **not_measured}
    info = torch_info(args.device)
    if args.merge_into:
        return merge(args.merge_into, rows_dir / ROWS_FILE, rows, info, not_measured)
    if not rows:
        print(f"{PROG}: no row measured; {args.out} not written")
        return 0
    context = {**base_context(), "gpu_name": info["pytorch_gpu_name"], **info,
               "pytorch_not_measured": not_measured}
    write_json(args.out, {"context": context, "benchmarks": rows})
    print(f"{PROG}: {len(rows)} rows -> {args.out}")
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, metavar="FILE.json", help="write the rows here")
    where.add_argument("--merge-into", type=Path, metavar="BENCH.json",
                       help="merge the rows into this run (the main job's bench.json)")
    parser.add_argument("--models", help="comma-separated model names (default: all)")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        type=lambda text: text.split(","),
                        help=f"comma-separated, of {', '.join(VARIANTS)} "
                             f"(default: {','.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=10, help="timed steps per repetition")
    parser.add_argument("--warmup", type=int, default=5,
                        help="steps before timing (torch.compile compiles in the first; AdamW "
                             "creates its state in the first, so a compiled step settles by "
                             "the third)")
    parser.add_argument("--budget", type=float, metavar="S",
                        help="seconds for all rows together (default: no limit)")
    parser.add_argument("--missing", action="store_true",
                        help="with --merge-into: only the rows that run lists as not measured")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--row-timeout", type=float, default=600,
                        help="seconds one row's process may take (compiling included)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: timed with the host clock, for tests only")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "VARIANT", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.child and not (args.out or args.merge_into):
        parser.error("one of --out or --merge-into is required")
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad:
        parser.error(f"unknown variant {bad[0]!r}; known: {', '.join(VARIANTS)}")
    for name in ("repetitions", "iterations", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.merge_into and not args.merge_into.is_file():
        parser.error(f"--merge-into {args.merge_into}: no such file")
    if args.missing and not args.merge_into:
        parser.error("--missing needs --merge-into RUN/bench.json")
    if args.budget is not None and not args.budget >= 0:
        parser.error(f"--budget {args.budget:g}: must be >= 0 seconds")
    if not args.row_timeout > 0:
        parser.error(f"--row-timeout {args.row_timeout:g}: must be > 0 seconds")
    return args


def torch_unavailable(device: str) -> str | None:
    """Why no row can be measured here, or None."""
    try:
        import torch
    except Exception as error:  # ImportError, or a broken install's OSError
        return f"torch is not importable ({type(error).__name__}: {error})"
    if device == "cuda" and not torch.cuda.is_available():
        return (f"torch {torch.__version__} sees no CUDA GPU "
                f"(built for CUDA {torch.version.cuda or 'none: a CPU-only build'})")
    return None


def torch_info(device: str) -> dict:
    import torch
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu (PyTorch on the host)"
    return {"pytorch_version": torch.__version__,
            "pytorch_cuda_version": str(torch.version.cuda),
            "pytorch_gpu_name": name}


# ---------------------------------------------------------------------------------------------
# The parent: one process per row, then the merge.


def run_row(args: argparse.Namespace, model: str, variant: str, rows_dir: Path,
            timeout: float) -> tuple[list | None, str]:
    """The row's Google Benchmark entries from its own process (stopped after ``timeout``
    seconds), or (None, why not)."""
    key = row_key(model, variant)
    file = rows_dir / (key.replace("/", "_").replace(":", "_") + ".json")
    if os.environ.get("RESIDENT_BENCH_RESUME") and file.is_file():
        try:
            kept = json.loads(file.read_text())["benchmarks"]
            print(f"{PROG}: {key} kept from an earlier run (RESIDENT_BENCH_RESUME)")
            return kept, ""
        except (ValueError, KeyError):
            pass
    file.unlink(missing_ok=True)
    print(f"{PROG}: {key}", flush=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", model, variant,
               str(file), "--repetitions", str(args.repetitions), "--iterations",
               str(args.iterations), "--warmup", str(args.warmup), "--batch", str(args.batch),
               "--seed", str(args.seed), "--device", args.device]
    log = file.with_suffix(".log")
    try:
        with log.open("w") as sink:
            done = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT,
                                  timeout=timeout)
    except subprocess.TimeoutExpired:
        limit = ("--row-timeout" if timeout >= args.row_timeout
                 else f"what was left of the {args.budget:g} s budget")
        return None, f"timed out after {timeout:.0f} s ({limit}; log: {log})"
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    if done.returncode != 0 or not file.is_file():
        last = lines[-1].strip() if lines else "no output"
        return None, f"{last[:300]} (exit status {done.returncode})"
    for line in lines:
        print(f"  {line}")
    return json.loads(file.read_text())["benchmarks"], ""


def merge(bench: Path, rows_file: Path, rows: list, info: dict, not_measured: dict) -> int:
    """Merge ``rows`` into ``bench`` with reports/merge (which validates them), then record
    the PyTorch context and the rows not measured in its context."""
    try:
        context = json.loads(bench.read_text())["context"]
    except (OSError, ValueError, KeyError) as error:
        print(f"{PROG}: {bench}: not a Google Benchmark JSON file ({error})", file=sys.stderr)
        return 2
    notes = {**info, "pytorch_not_measured": not_measured}
    if info["pytorch_gpu_name"] != context.get("gpu_name"):
        print(f"{PROG}: torch names the GPU {info['pytorch_gpu_name']!r}, the run "
              f"{context.get('gpu_name')!r} (kept as pytorch_gpu_name)")
    if rows:
        write_json(rows_file, {"context": context, "benchmarks": rows})
        done = subprocess.run([sys.executable, str(REPO / "reports" / "merge"), str(bench),
                               str(rows_file), "--out", str(bench)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            reason = f"reports/merge failed: {done.stderr.strip()[:300]}"
            print(f"{PROG}: {reason}")
            notes = {**info, "pytorch_skipped": reason}
    annotate(bench, notes)
    print(f"{PROG}: {len(rows)} rows merged into {bench}, {len(not_measured)} not measured")
    return 0


def annotate(bench: Path, notes: dict) -> None:
    """Add ``notes`` to the context of the Google Benchmark JSON file ``bench``."""
    document = json.loads(bench.read_text())
    document["context"].update(notes)
    write_json(bench, document)


def write_json(path: Path, document: dict) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n")


def base_context() -> dict:
    """The host part of a Google Benchmark context, for a file of its own (--out)."""
    commit = os.environ.get("RESIDENT_GIT_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
        except OSError:
            commit = ""
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host_name": socket.gethostname(), "executable": str(Path(__file__).resolve()),
            "num_cpus": os.cpu_count() or 1, "library_build_type": "release",
            "git_commit": commit or "unknown"}


# ---------------------------------------------------------------------------------------------
# The child: one row.


def child_main(args: argparse.Namespace) -> int:
    """Measure one row; write its Google Benchmark document to OUT. On failure the last line
    printed is the reason (the parent records it) and the exit status is 1."""
    model_name, variant, out = args.child
    try:
        document = measure_row(model_name, variant, args)
    except Exception as error:  # compile and CUDA failures alike: the parent records why
        traceback.print_exc()
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"{type(error).__name__}: {first}", flush=True)
        return 1
    write_json(Path(out), document)
    return 0


def measure_row(model_name: str, variant: str, args: argparse.Namespace) -> dict:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(HERE))
    from models import MODELS

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = MODELS[model_name](WINDOW, FEATURES, OUTPUTS).to(device)
    generator = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn(args.batch, WINDOW, FEATURES, generator=generator).to(device)
    y = torch.randn(args.batch, OUTPUTS, generator=generator).to(device)
    labels = torch.randint(0, 3, (args.batch,), generator=generator).to(device)  # classifiers
    if variant.startswith(SAMPLE_PREFIX):
        return measure_sample_row(model_name, variant, model, x, args)

    params = list(model.parameters())
    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in named if model.decays(n, p)], "weight_decay": WEIGHT_DECAY},
         {"params": [p for n, p in named if not model.decays(n, p)], "weight_decay": 0.0}],
        lr=LEARNING_RATE)

    def loss_of(inputs, targets):
        if getattr(model, "classifier", False):  # trend logits: cross-entropy on class labels
            return F.cross_entropy(model(inputs), labels)
        if hasattr(model, "training_loss"):
            return model.training_loss(inputs, targets)
        return F.mse_loss(model(inputs), targets)

    def clip_and_update():
        torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
        optimizer.step()

    mode = VARIANTS[variant]
    if mode is not None:
        loss_of = torch.compile(loss_of, mode=mode)
        clip_and_update = torch.compile(clip_and_update, mode=mode)
    graphs_step = mode == "reduce-overhead"

    def step():
        if graphs_step:
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(x, y)
        loss.backward()
        clip_and_update()
        return loss

    started = time.perf_counter()
    for _ in range(args.warmup):
        step()
    synchronize(device)
    warmup_s = time.perf_counter() - started
    graphs_before = compiled_graphs()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    repetitions = [time_repetition(step, args.iterations, device)
                   for _ in range(args.repetitions)]
    loss = float(step().detach())
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    recompiles = compiled_graphs() - graphs_before
    compiled = f"torch.compile mode {mode} (forward + loss; clip + AdamW)" if mode else "eager"
    label = (f"torch {torch.__version__}, {compiled}; B={args.batch} L={WINDOW} F={FEATURES}, "
             f"fp32 (TF32 off), AdamW, clip {MAX_GRAD_NORM:g}; {model.describe()}")
    counters = {**({PEAK_COUNTER: float(peak)} if peak is not None else {}),
                "parameters": float(model.parameter_count()),
                "batch": float(args.batch), "warmup_steps": float(args.warmup),
                "warmup_s": warmup_s, "recompiles": float(recompiles), "final_loss": loss}
    reals = [r[0] * 1e6 for r in repetitions]
    print(f"{row_key(model_name, variant)}: median {statistics.median(reals):.1f} us (min "
          f"{min(reals):.1f}, max {max(reals):.1f}) over {args.repetitions} x "
          f"{args.iterations} steps, warm-up {warmup_s:.1f} s, peak "
          f"{'-' if peak is None else f'{peak / 2**20:.1f} MiB'}, loss {loss:.4g}, "
          f"recompiles during timing {recompiles}")
    return {"context": {**base_context(), "gpu_name": torch_info(args.device)["pytorch_gpu_name"],
                        **torch_info(args.device)},
            "benchmarks": gb_rows(row_key(model_name, variant), repetitions, args.iterations,
                                  counters, label)}


def measure_sample_row(model_name: str, variant: str, model, x, args: argparse.Namespace) -> dict:
    """The sampler's row: model.sample(x, 1) averaged to the mean forecast, under no_grad."""
    import torch

    device = x.device
    mode = VARIANTS[variant[len(SAMPLE_PREFIX):]]
    if mode is not None:
        model.compiled_sampler_step = torch.compile(model.sampler_step, mode=mode)
    model.eval()

    def step():
        with torch.no_grad():
            if mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            return model.sample(x, 1).mean(dim=1)

    started = time.perf_counter()
    for _ in range(args.warmup):
        step()
    synchronize(device)
    warmup_s = time.perf_counter() - started
    graphs_before = compiled_graphs()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    repetitions = [time_repetition(step, args.iterations, device)
                   for _ in range(args.repetitions)]
    forecast = step()
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    recompiles = compiled_graphs() - graphs_before
    compiled = f"torch.compile mode {mode} (one sampler step)" if mode else "eager"
    label = (f"torch {torch.__version__}, {compiled}; {model.steps}-step ancestral sampler, "
             f"{args.batch} windows x 1 sample, L={WINDOW} F={FEATURES}, fp32 (TF32 off), "
             f"no_grad; {model.describe()}")
    counters = {**({PEAK_COUNTER: float(peak)} if peak is not None else {}),
                "parameters": float(model.parameter_count()),
                "batch": float(args.batch), "warmup_steps": float(args.warmup),
                "warmup_s": warmup_s, "recompiles": float(recompiles),
                "forecast_mean": float(forecast.mean())}
    reals = [r[0] * 1e6 for r in repetitions]
    print(f"{row_key(model_name, variant)}: median {statistics.median(reals):.1f} us (min "
          f"{min(reals):.1f}, max {max(reals):.1f}) over {args.repetitions} x "
          f"{args.iterations} samplings, warm-up {warmup_s:.1f} s, recompiles during timing "
          f"{recompiles}")
    return {"context": {**base_context(), "gpu_name": torch_info(args.device)["pytorch_gpu_name"],
                        **torch_info(args.device)},
            "benchmarks": gb_rows(row_key(model_name, variant), repetitions, args.iterations,
                                  counters, label)}


def synchronize(device) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compiled_graphs() -> int:
    """Graphs Dynamo compiled so far in this process (0 where it cannot say)."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])
    except Exception:
        return 0


def time_repetition(step, iterations: int, device) -> tuple[float, float]:
    """(mean seconds of one step, mean process CPU seconds of one step) over ``iterations``
    steps, each timed alone: CUDA events around it on an idle GPU, then a wait."""
    import torch
    total, cpu_started = 0.0, time.process_time()
    if device.type == "cuda":
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(iterations):
            start.record()
            step()
            stop.record()
            stop.synchronize()
            total += start.elapsed_time(stop) * 1e-3
    else:
        for _ in range(iterations):
            started = time.perf_counter()
            step()
            total += time.perf_counter() - started
    return total / iterations, (time.process_time() - cpu_started) / iterations


def gb_rows(key: str, repetitions: list[tuple[float, float]], iterations: int, counters: dict,
            label: str) -> list[dict]:
    """Iteration rows (one per repetition) and median/min/max aggregates, in microseconds, in
    the shape libbenchmark writes them (manual time)."""
    run_name = f"{key}/manual_time"
    count = len(repetitions)
    rows = [{"name": run_name, "family_index": 0, "per_family_instance_index": 0,
             "run_name": run_name, "run_type": "iteration", "repetitions": count,
             "repetition_index": index, "threads": 1, "iterations": iterations,
             "real_time": real * 1e6, "cpu_time": cpu * 1e6, "time_unit": "us",
             **counters, "samples_per_s": counters["batch"] / real, "label": label}
            for index, (real, cpu) in enumerate(repetitions)]
    reals, cpus = [r[0] for r in repetitions], [r[1] for r in repetitions]
    for name, pick in (("median", statistics.median), ("min", min), ("max", max)):
        real = pick(reals)
        rows.append({"name": f"{run_name}_{name}", "family_index": 0,
                     "per_family_instance_index": 0, "run_name": run_name,
                     "run_type": "aggregate", "repetitions": count, "threads": 1,
                     "aggregate_name": name, "aggregate_unit": "time", "iterations": count,
                     "real_time": real * 1e6, "cpu_time": pick(cpus) * 1e6, "time_unit": "us",
                     **counters, "samples_per_s": counters["batch"] / real, "label": label})
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
