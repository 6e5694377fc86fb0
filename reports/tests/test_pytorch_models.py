"""The plain PyTorch models of bench/pytorch/models.py are right: each against an independent
double-precision reference (the SSD against Mamba2's recurrence, the B-spline bases against a
scalar Cox-de Boor recursion, a KAN layer against its per-edge sum), gradients against finite
differences (torch.autograd.gradcheck in double at a tiny size), and a train step at the
benchmark's configuration. Skipped where torch is not importable. Runs on the CPU."""

import math
import subprocess
import sys

import pytest
from conftest import REPO

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench" / "pytorch"))
from models import (MODELS, Cfc, Kan, KanLinear, Mamba2, Xlstm,  # noqa: E402
                    segment_sums, ssd_single_chunk)

from resident_reports.loader import load_run  # noqa: E402
from resident_reports.stats import summarize_run  # noqa: E402

DOUBLE = torch.float64
REGRESSORS = sorted(n for n, cls in MODELS.items()
                    if not hasattr(cls, "training_loss") and not getattr(cls, "classifier", False))
"""Models trained on the MSE of their forward (diffusion's own tests: test_pytorch_diffusion;
the classifier tlob's: test_pytorch_tlob)."""


def test_the_registry_names_the_resident_models():
    assert set(MODELS) == {"kan", "mamba2", "cfc", "diffusion", "tlob", "xlstm", "tft"}
    assert all(cls.name == name for name, cls in MODELS.items())


def test_ssd_single_chunk_equals_the_recurrence():
    """h_t = exp(dt_t a) h_{t-1} + dt_t x_t b_t^T; y_t = h_t c_t + d x_t, per head, in a loop."""
    generator = torch.Generator().manual_seed(3)
    batch, length, heads, headdim, state = 2, 9, 3, 4, 5
    x = torch.randn(batch, length, heads, headdim, generator=generator, dtype=DOUBLE)
    dt = torch.rand(batch, length, heads, generator=generator, dtype=DOUBLE) * 0.5 + 0.01
    a = -torch.rand(heads, generator=generator, dtype=DOUBLE) * 4 - 0.5
    b = torch.randn(batch, length, state, generator=generator, dtype=DOUBLE)
    c = torch.randn(batch, length, state, generator=generator, dtype=DOUBLE)
    d = torch.randn(heads, generator=generator, dtype=DOUBLE)
    ones = torch.ones(length, length, dtype=torch.bool)
    y = ssd_single_chunk(x, dt, a, b, c, d, torch.tril(ones, -1), torch.tril(ones))

    expected = torch.empty_like(x)
    for n in range(batch):
        for h in range(heads):
            hidden = torch.zeros(headdim, state, dtype=DOUBLE)
            for t in range(length):
                hidden = math.exp(dt[n, t, h] * a[h]) * hidden \
                    + dt[n, t, h] * torch.outer(x[n, t, h], b[n, t])
                expected[n, t, h] = hidden @ c[n, t] + d[h] * x[n, t, h]
    error = (y - expected).abs().max().item()
    print(f"SSD vs recurrence: max error {error:.3g} (tolerance 1e-12)")
    assert error < 1e-12


def test_segment_sums_are_exact_partial_sums_and_minus_infinity_above():
    a = torch.tensor([0.5, -1.0, 2.0, -0.25], dtype=DOUBLE)
    ones = torch.ones(4, 4, dtype=torch.bool)
    out = segment_sums(a, torch.tril(ones, -1), torch.tril(ones))
    for t in range(4):
        for s in range(4):
            expected = a[s + 1:t + 1].sum().item() if s <= t else -math.inf
            assert out[t, s].item() == expected, (t, s)


def cox_de_boor(x: float, knots: list[float], m: int, order: int) -> float:
    """B_{m,order}(x) by the scalar recursion (half-open support [t_m, t_{m+1}) at order 0)."""
    if order == 0:
        return 1.0 if knots[m] <= x < knots[m + 1] else 0.0
    left = (x - knots[m]) / (knots[m + order] - knots[m]) * cox_de_boor(x, knots, m, order - 1)
    right = (knots[m + order + 1] - x) / (knots[m + order + 1] - knots[m + 1]) \
        * cox_de_boor(x, knots, m + 1, order - 1)
    return left + right


def test_b_splines_match_the_scalar_recursion_and_sum_to_one_on_the_grid():
    torch.manual_seed(0)
    layer = KanLinear(3, 2, grid_size=5, spline_order=3).double()
    x = torch.rand(40, 3, dtype=DOUBLE) * 2.4 - 1.2  # some outside [-1, 1]
    bases = layer.b_splines(x)
    assert bases.shape == (40, 3, 8)
    worst = 0.0
    for n in range(40):
        for i in range(3):
            knots = layer.grid[i].tolist()
            for m in range(8):
                worst = max(worst, abs(bases[n, i, m].item()
                                       - cox_de_boor(x[n, i].item(), knots, m, 3)))
    print(f"bases vs Cox-de Boor: max error {worst:.3g} (tolerance 1e-12)")
    assert worst < 1e-12
    inside = (x.abs() <= 1.0)
    sums = bases.sum(-1)
    assert torch.allclose(sums[inside], torch.ones_like(sums[inside]), atol=1e-12)


def test_a_kan_layer_is_the_per_edge_sum():
    """y_j = sum_i W_b[j, i] silu(x_i) + s[j, i] sum_m W_s[j, i, m] B_m(x_i), edge by edge."""
    torch.manual_seed(1)
    layer = KanLinear(4, 3).double()
    x = torch.rand(5, 4, dtype=DOUBLE) * 2 - 1
    y = layer(x)
    bases = layer.b_splines(x)
    for n in range(5):
        for j in range(3):
            expected = 0.0
            for i in range(4):
                value = x[n, i].item()
                expected += layer.base_weight[j, i].item() * value / (1 + math.exp(-value))
                expected += layer.spline_scaler[j, i].item() * sum(
                    layer.spline_weight[j, i, m].item() * bases[n, i, m].item() for m in range(8))
            assert y[n, j].item() == pytest.approx(expected, abs=1e-12)


def tiny(name: str):
    """The model at a tiny size, in double."""
    torch.manual_seed(7)
    if name == "kan":
        return Kan(window=2, features=3, outputs=2, hidden=(3,)).double()
    if name == "cfc":
        return Cfc(window=5, features=2, outputs=2, hidden=3, units=4).double()
    if name == "xlstm":
        return Xlstm(window=5, features=2, outputs=2, d_model=4, heads=2, blocks=2,
                     inner=8, ffn=4).double()
    return Mamba2(window=5, features=2, outputs=2, d_model=4, n_layers=2, expand=2, headdim=4,
                  d_state=2, d_conv=4).double()


@pytest.mark.parametrize("name", REGRESSORS)
def test_gradients_match_finite_differences(name):
    model = tiny(name)
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())
    x = torch.randn(2, *((2, 3) if name == "kan" else (5, 2)), dtype=DOUBLE, requires_grad=True)

    def forward(inputs, *values):
        return torch.func.functional_call(model, dict(zip(names, values)), (inputs,))

    assert torch.autograd.gradcheck(forward, (x, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_gradcheck_fails_on_a_wrong_gradient():
    """Negative control: gradcheck, as called above, rejects a backward that is off by 1.5x."""
    class WrongSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x * grad

    x = torch.randn(4, dtype=DOUBLE, requires_grad=True)
    assert not torch.autograd.gradcheck(WrongSquare.apply, (x,), eps=1e-6, atol=1e-6,
                                        rtol=1e-5, raise_exception=False)


@pytest.mark.parametrize("name", REGRESSORS)
def test_a_train_step_at_the_bench_config(name):
    """Forward/backward at L = 64, F = 32 (batch 4): every parameter gets a finite gradient,
    and AdamW steps on one batch lower its loss."""
    torch.manual_seed(2)
    model = MODELS[name](64, 32, 1)
    x, y = torch.randn(4, 64, 32), torch.randn(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        prediction = model(x)
        assert prediction.shape == (4, 1)
        loss = torch.nn.functional.mse_loss(prediction, y)
        loss.backward()
        for param_name, param in model.named_parameters():
            assert param.grad is not None and torch.isfinite(param.grad).all(), param_name
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    print(f"{model.describe()}: loss {losses[0]:.4g} -> {losses[-1]:.4g}")


def test_the_reference_configurations():
    assert MODELS["kan"](64, 32, 1).parameter_count() == 3 * (2048 * 64 + 64 * 32 + 32 * 1) \
        - (2048 * 64 + 64 * 32 + 32) + 8 * (2048 * 64 + 64 * 32 + 32)
    mamba = MODELS["mamba2"](64, 32, 1)
    mixer = mamba.mixers[0]
    assert (mixer.d_inner, mixer.nheads, mixer.headdim, mixer.d_state) == (128, 4, 32, 32)
    assert mixer.in_proj.out_features == 2 * 128 + 2 * 32 + 4
    assert len(mamba.mixers) == 2


def test_the_script_writes_rows_on_the_cpu(tmp_path):
    """The whole script, eager KAN on the CPU at a tiny batch: rows the loader accepts."""
    out = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench/pytorch/supervised_models.py"), "--device", "cpu",
         "--models", "kan", "--variants", "eager", "--repetitions", "3", "--iterations", "1",
         "--warmup", "1", "--batch", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    run = load_run(out)
    assert [row.aggregate for row in run.rows] == [None, None, None, "median", "min", "max"]
    summary = summarize_run(run).measured["supervised_step/pytorch_eager/model:kan"]
    assert summary.repetitions == 3 and summary.counters["batch"] == 2
    assert summary.counters["recompiles"] == 0
