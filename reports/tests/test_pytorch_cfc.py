"""The plain PyTorch CfC of bench/pytorch/models.py is right: its forward against an
independent scalar loop in double (MODELS.md section 5's equations written element by element),
for the default and the pure cell, with ts = 1 and with uneven elapsed times from an input
column; the elapsed time changes the prediction; gradients against finite differences with
uneven elapsed times; the reference configuration's parameter count. Skipped where torch is not
importable. Runs on the CPU."""

import math
import sys

import pytest
from conftest import REPO

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench" / "pytorch"))
from models import Cfc  # noqa: E402

DOUBLE = torch.float64


def scalar_cfc(model: Cfc, x: torch.Tensor) -> list[list[float]]:
    """pred[b] by loops over scalars, from the model's parameters."""
    cell = model.cell
    w_bb, b_bb = cell.backbone.weight.tolist(), cell.backbone.bias.tolist()
    heads = [cell.ff1] if model.mode == "pure" else [cell.ff1, cell.ff2, cell.time_a,
                                                      cell.time_b]
    hw, hb = [h.weight.tolist() for h in heads], [h.bias.tolist() for h in heads]
    batch, window, features = x.shape
    out = []
    for b in range(batch):
        h = [0.0] * model.hidden
        for t in range(window):
            ts = 1.0 if model.time_column is None else x[b, t, model.time_column].item()
            inp = x[b, t].tolist() + h
            z = [1.7159 * math.tanh(0.666 * (b_bb[k] + sum(w * v for w, v in zip(w_bb[k], inp))))
                 for k in range(model.units)]
            g = [[hb[c][i] + sum(w * v for w, v in zip(hw[c][i], z)) for i in range(model.hidden)]
                 for c in range(len(heads))]
            new = []
            for i in range(model.hidden):
                if model.mode == "pure":
                    a, wt, f = cell.A[i].item(), cell.w_tau[i].item(), g[0][i]
                    new.append(-a * math.exp(-ts * (abs(wt) + abs(f))) * f + a)
                else:
                    f1, f2 = math.tanh(g[0][i]), math.tanh(g[1][i])
                    s = 1.0 / (1.0 + math.exp(-(g[2][i] * ts + g[3][i])))
                    new.append(f1 * (1.0 - s) + s * f2)
            h = new
        ro_w, ro_b = model.readout.weight.tolist(), model.readout.bias.tolist()
        out.append([ro_b[o] + sum(w * v for w, v in zip(ro_w[o], h)) for o in range(len(ro_b))])
    return out


def tiny(mode: str, time_column):
    torch.manual_seed(5)
    model = Cfc(window=6, features=3, outputs=2, hidden=4, units=5, mode=mode,
                time_column=time_column).double()
    if mode == "pure":  # away from the init (w_tau = 0 is the kink of |w_tau|)
        with torch.no_grad():
            model.cell.w_tau.copy_(torch.tensor([0.3, -0.4, 0.5, -0.2], dtype=DOUBLE))
            model.cell.A.copy_(torch.tensor([0.7, 1.2, 0.9, 1.4], dtype=DOUBLE))
    return model


def inputs(time_column):
    generator = torch.Generator().manual_seed(6)
    x = torch.rand(3, 6, 3, generator=generator, dtype=DOUBLE) * 3 - 1.5
    if time_column is not None:
        x[:, :, time_column] = torch.rand(3, 6, generator=generator, dtype=DOUBLE) * 2.4 + 0.1
    return x


@pytest.mark.parametrize("mode", ["default", "pure"])
@pytest.mark.parametrize("time_column", [None, 1])
def test_cfc_equals_the_scalar_loop(mode, time_column):
    model, x = tiny(mode, time_column), inputs(time_column)
    got = model(x)
    want = torch.tensor(scalar_cfc(model, x), dtype=DOUBLE)
    error = (got - want).abs().max().item()
    print(f"cfc {mode}, time column {time_column}: max error {error:.3g} (tolerance 1e-12)")
    assert error < 1e-12


@pytest.mark.parametrize("mode", ["default", "pure"])
def test_the_elapsed_time_changes_the_prediction(mode):
    x = inputs(1)
    uneven, unit = tiny(mode, 1), tiny(mode, None)
    assert (uneven(x) - unit(x)).abs().max().item() > 1e-3


@pytest.mark.parametrize("mode", ["default", "pure"])
def test_gradients_with_uneven_elapsed_time_match_finite_differences(mode):
    model, x = tiny(mode, 1), inputs(1).requires_grad_(True)
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

    def forward(values_x, *values):
        return torch.func.functional_call(model, dict(zip(names, values)), (values_x,))

    assert torch.autograd.gradcheck(forward, (x, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_the_reference_configuration():
    model = Cfc(64, 32, 1)
    assert (model.hidden, model.units, model.mode, model.time_column) == (64, 128, "default",
                                                                          None)
    backbone = (32 + 64) * 128 + 128
    heads = 4 * (128 * 64 + 64)
    assert model.parameter_count() == backbone + heads + 64 + 1
    pure = Cfc(64, 32, 1, mode="pure")
    assert pure.parameter_count() == backbone + (128 * 64 + 64) + 2 * 64 + 64 + 1
    assert not pure.decays("cell.A", pure.cell.A) and pure.decays("cell.ff1.weight",
                                                                    pure.cell.ff1.weight)
