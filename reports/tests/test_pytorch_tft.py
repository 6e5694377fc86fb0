"""The plain PyTorch TFT of bench/pytorch/models.py is right: its forward against an independent
evaluation in double (per-variable loops instead of the stacked matmuls, the LSTM cell written
out per step instead of nn.LSTM, per-head softmaxes; tests/reference/tft_reference.h's
equations), the selection and attention weights are distributions, the pinball training loss
against its formula, gradients against finite differences (gradcheck; and a wrong gradient is
rejected), and the reference configuration's parameter count against resident's slab. Skipped
where torch is not importable. Runs on the CPU."""

import math
import sys

import pytest
from conftest import REPO

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench" / "pytorch"))
from models import MODELS, Tft  # noqa: E402

DOUBLE = torch.float64
F = torch.nn.functional


def tiny(outputs: int = 2, heads: int = 2) -> Tft:
    torch.manual_seed(3)
    model = Tft(window=5, features=3, outputs=outputs, hidden=8, heads=heads, prescale=2).double()
    with torch.no_grad():  # away from the init's gamma = 1, beta = 0
        for name, p in model.named_parameters():
            if name.endswith("gamma") or name.endswith("norm.weight"):
                p.uniform_(0.7, 1.3)
            elif name.endswith("beta") or name.endswith("norm.bias"):
                p.uniform_(-0.3, 0.3)
    return model


def layer_norm(r, gamma, beta):
    mean = r.mean(-1, keepdim=True)
    var = ((r - mean) ** 2).mean(-1, keepdim=True)
    return (r - mean) / torch.sqrt(var + 1e-5) * gamma + beta


def gan(module, a, resid):
    pre = a @ module.glu.weight.T + module.glu.bias
    half = pre.shape[-1] // 2
    r = resid + pre[..., :half] * torch.sigmoid(pre[..., half:])
    return layer_norm(r, module.norm.weight, module.norm.bias)


def grn(module, a):
    eta = F.elu(a @ module.fc1.weight.T + module.fc1.bias) @ module.fc2.weight.T + module.fc2.bias
    resid = a if module.skip is None else a @ module.skip.weight.T + module.skip.bias
    return gan(module.gate, eta, resid)


def independent(model: Tft, x: torch.Tensor):
    """The forward of tft_reference.h, one window at a time, by loops."""
    batch, window, features = x.shape
    hidden, heads = model.hidden, model.heads
    dk = hidden // heads
    var = model.vsn_var
    lstm = model.lstm
    preds, selections, attentions = [], [], []
    for b in range(batch):
        xs, vs = [], []
        for t in range(window):
            e = [x[b, t, j] * model.prescale_weight[j] + model.prescale_bias[j]
                 for j in range(features)]
            v = torch.softmax(grn(model.vsn_flat, torch.cat(e)), dim=0)
            xi = torch.zeros(hidden, dtype=DOUBLE)
            for j in range(features):
                eta = F.elu(var.fc1_w[j] @ e[j] + var.fc1_b[j])
                eta = var.fc2_w[j] @ eta + var.fc2_b[j]
                pre = var.glu_w[j] @ eta + var.glu_b[j]
                r = var.skip_w[j] @ e[j] + var.skip_b[j] + pre[:hidden] * torch.sigmoid(
                    pre[hidden:])
                xi = xi + v[j] * layer_norm(r, var.gamma[j], var.beta[j])
            xs.append(xi)
            vs.append(v)
        h, c = torch.zeros(hidden, dtype=DOUBLE), torch.zeros(hidden, dtype=DOUBLE)
        phis, thetas = [], []
        for t in range(window):
            z = (lstm.weight_ih_l0 @ xs[t] + lstm.bias_ih_l0 + lstm.weight_hh_l0 @ h
                 + lstm.bias_hh_l0)
            i, f = torch.sigmoid(z[:hidden]), torch.sigmoid(z[hidden:2 * hidden])
            g, o = torch.tanh(z[2 * hidden:3 * hidden]), torch.sigmoid(z[3 * hidden:])
            c = f * c + i * g
            h = o * torch.tanh(c)
            phis.append(gan(model.lstm_gate, h, xs[t]))
            thetas.append(grn(model.enrich, phis[-1]))
        q = model.query.weight @ thetas[-1] + model.query.bias
        abar = torch.zeros(window, dtype=DOUBLE)
        for hh in range(heads):
            cols = slice(hh * dk, hh * dk + dk)
            scores = torch.stack([
                (q[cols] @ (model.key.weight @ thetas[t] + model.key.bias)[cols]) / math.sqrt(dk)
                for t in range(window)])
            abar = abar + torch.softmax(scores, dim=0) / heads
        mixed = sum(abar[t] * (model.value.weight @ thetas[t] + model.value.bias)
                    for t in range(window))
        delta = gan(model.attn_gate, model.out.weight @ mixed, thetas[-1])
        u = gan(model.out_gate, grn(model.ff, delta), phis[-1])
        preds.append(model.head.weight @ u + model.head.bias)
        selections.append(torch.stack(vs))
        attentions.append(abar)
    return torch.stack(preds), torch.stack(selections), torch.stack(attentions)


def test_forward_matches_an_independent_evaluation():
    model = tiny()
    x = torch.randn(3, 5, 3, dtype=DOUBLE, generator=torch.Generator().manual_seed(1))
    details = {}
    got = model(x, details)
    want, selection, attention = independent(model, x)
    assert got.shape == (3, 2 * 3)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(details["selection"], selection, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(details["attention"], attention, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(details["selection"].sum(-1), torch.ones(3, 5, dtype=DOUBLE))
    torch.testing.assert_close(details["attention"].sum(-1), torch.ones(3, dtype=DOUBLE))


def test_pinball_loss_and_median():
    model = tiny(outputs=2)
    x = torch.randn(4, 5, 3, dtype=DOUBLE, generator=torch.Generator().manual_seed(2))
    y = torch.randn(4, 2, dtype=DOUBLE, generator=torch.Generator().manual_seed(3))
    pred = model(x).view(4, 2, 3)
    want = 0.0
    for b in range(4):
        for o in range(2):
            for k, tau in enumerate((0.1, 0.5, 0.9)):
                u = (y[b, o] - pred[b, o, k]).item()
                want += tau * u if u >= 0 else (tau - 1) * u
    assert model.training_loss(x, y).item() == pytest.approx(want / 24, rel=1e-12)
    torch.testing.assert_close(model.median(x), pred[..., 1])


def test_gradients_match_finite_differences():
    model = tiny(outputs=1, heads=4)
    x = torch.randn(2, 5, 3, dtype=DOUBLE, generator=torch.Generator().manual_seed(4))
    y = torch.randn(2, 1, dtype=DOUBLE, generator=torch.Generator().manual_seed(5))
    params = list(model.parameters())
    inputs = tuple(p.detach().clone().requires_grad_(True) for p in params)
    assert torch.autograd.gradcheck(lambda *v: torch.func.functional_call(
        model, {n: t for (n, _), t in zip(model.named_parameters(), v)}, (x,)).sum(), inputs,
        eps=1e-6, atol=1e-6)


def test_gradcheck_rejects_a_wrong_gradient():
    class Wrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return torch.tanh(a)

        @staticmethod
        def backward(ctx, grad):
            return grad  # should be grad * (1 - tanh^2)

    a = torch.randn(4, dtype=DOUBLE, requires_grad=True)
    with pytest.raises(Exception):
        torch.autograd.gradcheck(Wrong.apply, (a,), eps=1e-6, atol=1e-6)


def test_the_reference_configuration_matches_the_resident_slab():
    model = MODELS["tft"](64, 32, 1)
    hidden, features, prescale, dv = 32, 32, 8, 8

    def grn(inputs, out):
        n = (hidden * inputs + hidden + hidden * hidden + hidden + 2 * out * hidden + 2 * out
             + 2 * out)
        return n + (out * inputs + out if inputs != out else 0)

    resident = (2 * features * prescale + grn(features * prescale, features)
                + features * grn(prescale, hidden) + 2 * 4 * hidden * hidden + 4 * hidden
                + 3 * (2 * hidden * hidden + 2 * hidden + 2 * hidden) + 2 * grn(hidden, hidden)
                + 2 * (hidden * hidden + hidden) + dv * hidden + dv + hidden * dv
                + 3 * hidden + 3)
    # nn.LSTM keeps two biases (b_ih, b_hh) where resident keeps their sum: 4H more.
    assert model.parameter_count() == resident + 4 * hidden
    assert model(torch.randn(2, 64, 32)).shape == (2, 3)


def test_the_script_writes_tft_rows_on_the_cpu(tmp_path):
    """supervised_models.py trains the TFT through its training_loss (pinball), eager, on the
    CPU at a tiny batch: rows the loader accepts."""
    import subprocess

    out = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench/pytorch/supervised_models.py"), "--device", "cpu",
         "--models", "tft", "--variants", "eager", "--repetitions", "3", "--iterations", "1",
         "--warmup", "1", "--batch", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "supervised_step/pytorch_eager/model:tft" in out.read_text()
