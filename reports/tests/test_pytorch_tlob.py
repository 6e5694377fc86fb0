"""The plain PyTorch TLOB of bench/pytorch/models.py is right: BiN against its formula written
out with explicit means and unbiased stds; one attention layer against a scalar loop in double;
gradients against finite differences (gradcheck, double, a tiny config with a hidden head layer);
the parameter count of the reference configuration equals the resident slab's (the tensor list
of lib/models/tlob/tlob_init.cpp); 3 logits per window. Skipped where torch is not importable.
Runs on the CPU."""

import math
import sys

import pytest
from conftest import REPO

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench" / "pytorch"))
from models import MODELS, Bin, Tlob, TlobLayer  # noqa: E402

DOUBLE = torch.float64


def test_bin_matches_its_formula():
    torch.manual_seed(0)
    b = Bin(8, 5).double()
    with torch.no_grad():
        b.b1.uniform_(-1, 1)
        b.b2.uniform_(-1, 1)
    x = torch.randn(2, 8, 5, dtype=DOUBLE)
    got = b(x)
    for s in range(2):
        for t in range(8):
            row = x[s, t]
            m1, s1 = row.mean(), math.sqrt(((row - row.mean()) ** 2).sum() / 4)
            for f in range(5):
                col = x[s, :, f]
                m2, s2 = col.mean(), math.sqrt(((col - col.mean()) ** 2).sum() / 7)
                want = (b.y1 * (b.l1[t] * (x[s, t, f] - m1) / s1 + b.b1[t])
                        + b.y2 * (b.l2[f] * (x[s, t, f] - m2) / s2 + b.b2[f]))
                assert abs(float((got[s, t, f] - want).detach())) < 1e-12


def test_attention_layer_matches_a_scalar_loop():
    torch.manual_seed(1)
    layer = TlobLayer(4, 4, 2).double()
    x = torch.randn(1, 3, 4, dtype=DOUBLE)
    got = layer(x)[0]
    qkv = layer.qkv(x)[0]
    a = torch.zeros(3, 8, dtype=DOUBLE)
    for h in range(2):
        for t in range(3):
            scores = [sum(qkv[t, h * 4 + i] * qkv[s, 8 + h * 4 + i] for i in range(4)) / 2.0
                      for s in range(3)]
            mx = max(scores)
            e = [math.exp(float(v - mx)) for v in scores]
            for i in range(4):
                a[t, h * 4 + i] = sum(e[s] / sum(e) * qkv[s, 16 + h * 4 + i] for s in range(3))
    y = layer.norm(layer.w0(a) + x[0])
    want = layer.fc2(torch.nn.functional.gelu(layer.fc1(y), approximate="tanh")) + x[0]
    assert torch.allclose(got, want, atol=1e-12)


def test_gradcheck_in_double():
    torch.manual_seed(2)
    model = Tlob(16, 3, 1, hidden=8, pairs=1, heads=1, head_limit=2).double()
    assert len(model.head) == 2  # 8 -> 2 -> 3: a hidden head layer
    x = torch.randn(2, 16, 3, dtype=DOUBLE)
    params = list(model.parameters())
    assert torch.autograd.gradcheck(lambda xx: model(xx), (x.clone().requires_grad_(),),
                                    eps=1e-6, atol=1e-5)
    loss = torch.nn.functional.cross_entropy(model(x), torch.tensor([0, 2]))
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)


def test_reference_config_parameter_count_and_outputs():
    torch.manual_seed(3)
    model = MODELS["tlob"](64, 32, 1)
    L, F, H = 64, 32, 64
    expected = 2 * L + 2 * F + 2 + H * F + H
    for k in range(8):
        d = H if k % 2 == 0 else L
        o = d // 4 if k // 2 == 3 else d
        expected += 3 * d * d + 3 * d + d * d + d + 2 * d + 4 * d * d + 4 * d + o * 4 * d + o
    expected += 256 * 64 + 64 + 64 * 3 + 3
    assert model.parameter_count() == expected
    assert model(torch.randn(2, 64, 32)).shape == (2, 3)
