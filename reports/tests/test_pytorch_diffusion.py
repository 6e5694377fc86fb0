"""The plain PyTorch diffusion forecaster of bench/pytorch/models.py is right: the schedules
against their closed forms (linear endpoints, cosine alpha_bar = f(t + 1) / f(0), the posterior
mean's coefficients against DDIM's form), the time sinusoid against its formula, the denoiser
against the same algebra written with explicit matrices in double, the training loss's gradient
against finite differences (gradcheck in double, the draws fixed by a seed), the sampler step
against its formula (no noise at t = 0), a train step at the benchmark's configuration that
lowers the loss on fixed draws, and the script's CPU rows (a train step row and a sampling row).
Skipped where torch is not importable. Runs on the CPU."""

import math
import subprocess
import sys

import pytest
from conftest import REPO

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench" / "pytorch"))
from models import MODELS, Diffusion, diffusion_schedule, time_sinusoid  # noqa: E402

from resident_reports.loader import load_run  # noqa: E402
from resident_reports.stats import summarize_run  # noqa: E402

DOUBLE = torch.float64


def tiny() -> Diffusion:
    torch.manual_seed(3)
    return Diffusion(window=3, features=2, outputs=2, steps=20, width=5, blocks=2,
                     time_dim=4, samples=4).double()


def test_registered_with_its_own_loss_and_sampler():
    assert MODELS["diffusion"] is Diffusion
    assert hasattr(Diffusion, "training_loss") and hasattr(Diffusion, "sample")


def test_linear_schedule_endpoints_and_products():
    s = diffusion_schedule("linear", 200)
    assert s["beta"][0].item() == pytest.approx(5e-4, rel=1e-6)
    assert s["beta"][-1].item() == pytest.approx(0.1, rel=1e-6)
    assert torch.allclose(s["alpha_bar"], torch.cumprod(1 - s["beta"].double(), 0).float(),
                          rtol=1e-5)


def test_cosine_schedule_matches_the_closed_form():
    steps = 200
    s = diffusion_schedule("cosine", steps)

    def f(u):
        return math.cos((u / steps + 0.008) / 1.008 * math.pi / 2) ** 2

    for t in range(steps - 1):  # the last beta is clipped to 0.999
        assert s["alpha_bar"][t].item() == pytest.approx(f(t + 1) / f(0), rel=1e-5, abs=1e-7)
    assert s["beta"][-1].item() == pytest.approx(0.999)


def test_posterior_mean_coefficients():
    for kind in ("linear", "cosine"):
        s = {k: v.double() for k, v in diffusion_schedule(kind, 50).items()}
        for t in range(1, 49):
            x0, eps = 0.7, -1.3
            ab, abp = s["alpha_bar"][t].item(), s["alpha_bar"][t - 1].item()
            x_t = math.sqrt(ab) * x0 + math.sqrt(1 - ab) * eps
            mu = s["c1"][t].item() * x0 + s["c2"][t].item() * x_t
            ddim = math.sqrt(abp) * x0 + math.sqrt(1 - abp - s["sigma"][t].item() ** 2) * eps
            assert mu == pytest.approx(ddim, abs=1e-5), (kind, t)


def test_time_sinusoid_formula():
    s = time_sinusoid(torch.tensor([3]), 8)[0]
    for k in range(4):
        w = 1e4 ** (-k / 3)
        assert s[k].item() == pytest.approx(math.sin(3 * w), abs=1e-6)
        assert s[4 + k].item() == pytest.approx(math.cos(3 * w), abs=1e-6)


def test_denoiser_against_explicit_matrices():
    model = tiny()
    x_t, t = torch.randn(3, 2, dtype=DOUBLE), torch.tensor([0, 7, 19])
    window = torch.randn(3, 3, 2, dtype=DOUBLE)
    got = model.denoise(x_t, t, model.condition(window))

    def lin(layer, v):
        return v @ layer.weight.T + layer.bias

    def gelu(v):
        return 0.5 * v * (1 + torch.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))

    def silu(v):
        return v / (1 + torch.exp(-v))

    half = 2
    w = torch.tensor([math.exp(-k * math.log(1e4) / (half - 1)) for k in range(half)],
                     dtype=DOUBLE)
    arg = t.double()[:, None] * w
    temb = lin(model.time_fc2, gelu(lin(model.time_fc1, torch.cat([arg.sin(), arg.cos()], 1))))
    cond = lin(model.cond_fc2, silu(lin(model.cond_fc1, window.reshape(3, -1))))
    h = lin(model.input, torch.cat([x_t, cond, temb], 1))
    for block in model.blocks:
        mean = h.mean(1, keepdim=True)
        var = ((h - mean) ** 2).mean(1, keepdim=True)
        n = (h - mean) / torch.sqrt(var + 1e-5) * block.norm.weight + block.norm.bias
        h = h + lin(block.fc2, silu(lin(block.fc1, n) + temb))
    want = lin(model.output, h)
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-6)  # sinusoid in float


class _TrainingLoss(torch.nn.Module):
    """forward = the wrapped model's training_loss (functional_call calls forward)."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, x, y):
        return self.m.training_loss(x, y)


def test_training_loss_gradients_match_finite_differences():
    wrapper = _TrainingLoss(tiny())
    names = [n for n, _ in wrapper.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in wrapper.parameters())
    x = torch.randn(3, 3, 2, dtype=DOUBLE)
    y = torch.randn(3, 2, dtype=DOUBLE, requires_grad=True)

    def loss(targets, *values):
        torch.manual_seed(11)  # the same t and eps at every evaluation
        return torch.func.functional_call(wrapper, dict(zip(names, values)), (x, targets))

    assert torch.autograd.gradcheck(loss, (y, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_sampler_step_formula_and_no_noise_at_zero():
    model = tiny()
    cond = model.condition(torch.randn(2, 3, 2, dtype=DOUBLE))
    x_t, z = torch.randn(2, 2, dtype=DOUBLE), torch.randn(2, 2, dtype=DOUBLE)
    for t in (0, 5):
        tt = torch.full((2,), t)
        eps = model.denoise(x_t, tt, cond)
        x0 = model.sqrt_recip_alpha_bar[t] * x_t - model.sqrt_recip_alpha_bar_minus_one[t] * eps
        mean = model.c1[t] * x0 + model.c2[t] * x_t
        want = mean + (model.sigma[t] * z if t > 0 else 0)
        assert torch.allclose(model.sampler_step(x_t, tt, cond, z), want, atol=1e-6)
    torch.manual_seed(1)
    samples = model.sample(torch.randn(3, 3, 2, dtype=DOUBLE), 4)
    assert samples.shape == (3, 4, 2) and torch.isfinite(samples).all()
    assert model(torch.randn(3, 3, 2, dtype=DOUBLE)).shape == (3, 2)


def test_a_train_step_at_the_bench_config():
    """The epsilon loss at L = 64, F = 32 (batch 4) on fixed draws: finite gradients for every
    parameter, and AdamW steps lower it (lr 1e-4: at 1e-3 Adam's first steps, each weight moved
    by lr, overshoot on the 2048-wide history input of a 4-window batch and the loss oscillates)."""
    torch.manual_seed(2)
    model = Diffusion(64, 32, 1)
    x, y = torch.randn(4, 64, 32), torch.randn(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        torch.manual_seed(9)
        loss = model.training_loss(x, y)
        loss.backward()
        for name, param in model.named_parameters():
            assert param.grad is not None and torch.isfinite(param.grad).all(), name
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    print(f"{model.describe()}: loss {losses[0]:.4g} -> {losses[-1]:.4g}")


def test_the_script_writes_step_and_sampling_rows_on_the_cpu(tmp_path):
    out = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench/pytorch/supervised_models.py"), "--device", "cpu",
         "--models", "diffusion", "--variants", "eager", "--repetitions", "3", "--iterations",
         "1", "--warmup", "1", "--batch", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    measured = summarize_run(load_run(out)).measured
    for key in ("supervised_step/pytorch_eager/model:diffusion",
                "supervised_sample/pytorch_eager/model:diffusion"):
        assert measured[key].repetitions == 3 and measured[key].counters["batch"] == 2, key
