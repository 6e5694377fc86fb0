"""The plain PyTorch xLSTM of bench/pytorch/models.py is right: the mLSTM cell's parallel
stabilized form against the spec's recurrent form (C_t, n_t, m_t carried step by step) in double,
including input gates whose exp overflows double; the sLSTM recurrence against a scalar loop;
the headwise projection against its index formula; gradients against finite differences
(gradcheck, double, a tiny config with an mLSTM and an sLSTM block and nonzero gate and recurrent
weights); the reference configuration's parameter count and decayed count equal the resident
slab's (the tensor list of lib/models/xlstm/xlstm_config.cpp); a train step at the bench config;
the script's CPU rows. Skipped where torch is not importable. Runs on the CPU."""

import math
import subprocess
import sys

import pytest
from conftest import REPO

torch = pytest.importorskip("torch")
sys.path.insert(0, str(REPO / "bench" / "pytorch"))
from models import (MODELS, SlstmBlock, Xlstm, headwise,  # noqa: E402
                    mlstm_cell_parallel)

from resident_reports.loader import load_run  # noqa: E402
from resident_reports.stats import summarize_run  # noqa: E402

DOUBLE = torch.float64


def log_sigmoid(x: float) -> float:
    return min(x, 0.0) - math.log1p(math.exp(-abs(x)))


def mlstm_cell_recurrent(q, k, v, igate, fgate, eps: float) -> torch.Tensor:
    """MODELS.md section 2's recurrent form for one head, scalars in double: q, k, v [L, DH],
    igate, fgate [L]; m_{-1} = -inf, C_{-1} = n_{-1} = 0."""
    length, dim = q.shape
    scale = 1.0 / math.sqrt(dim)
    c = [[0.0] * dim for _ in range(dim)]
    n, m = [0.0] * dim, -math.inf
    out = torch.zeros(length, dim, dtype=DOUBLE)
    for t in range(length):
        lf, it = log_sigmoid(float(fgate[t])), float(igate[t])
        m_new = max(lf + m, it)
        fp, ip = math.exp(lf + m - m_new), math.exp(it - m_new)
        m = m_new
        kt, vt, qt = k[t].tolist(), v[t].tolist(), q[t].tolist()
        for a in range(dim):
            n[a] = fp * n[a] + ip * kt[a] * scale
            for b in range(dim):
                c[a][b] = fp * c[a][b] + ip * kt[a] * scale * vt[b]
        nq = sum(n[a] * qt[a] for a in range(dim))
        denominator = max(abs(nq), math.exp(-m)) + eps
        for b in range(dim):
            out[t, b] = sum(c[a][b] * qt[a] for a in range(dim)) / denominator
    return out


@pytest.mark.parametrize("igate_offset", [0.0, 800.0])
def test_parallel_mlstm_cell_equals_the_recurrent_form(igate_offset):
    """igate_offset 800: exp(i~) overflows double, so only a stabilized form stays finite."""
    generator = torch.Generator().manual_seed(11)
    batch, heads, length, dim = 2, 2, 7, 3
    q, k, v = (torch.randn(batch, heads, length, dim, generator=generator, dtype=DOUBLE)
               for _ in range(3))
    igate = torch.randn(batch, heads, length, generator=generator, dtype=DOUBLE) * 3 \
        + igate_offset
    fgate = torch.randn(batch, heads, length, generator=generator, dtype=DOUBLE) * 3 + 1
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
    got = mlstm_cell_parallel(q, k, v, igate, fgate, causal, 1e-6)
    assert torch.isfinite(got).all()
    worst = 0.0
    for b in range(batch):
        for h in range(heads):
            want = mlstm_cell_recurrent(q[b, h], k[b, h], v[b, h], igate[b, h], fgate[b, h],
                                        1e-6)
            worst = max(worst, (got[b, h] - want).abs().max().item())
    print(f"parallel vs recurrent mLSTM (i~ offset {igate_offset:g}): max error {worst:.3g} "
          f"(tolerance 1e-12)")
    assert worst < 1e-12


def test_headwise_is_the_block_diagonal_product():
    generator = torch.Generator().manual_seed(12)
    x = torch.randn(3, 8, generator=generator, dtype=DOUBLE)
    weight = torch.randn(2, 4, 4, generator=generator, dtype=DOUBLE)
    got = headwise(x, weight)
    for r in range(3):
        for blk in range(2):
            for o in range(4):
                want = sum(weight[blk, o, i].item() * x[r, blk * 4 + i].item() for i in range(4))
                assert got[r, blk * 4 + o].item() == pytest.approx(want, abs=1e-12)


def test_slstm_recurrence_equals_a_scalar_loop():
    """xlstm_reference.h's sLSTM cell unit by unit: raw = pre + R h_{t-1}, m_0 = i~_0, c_0 =
    tanh z~_0, n_0 = 1; then the stabilized updates; h = sigmoid(o~) c / n."""
    torch.manual_seed(13)
    width, heads, length, batch = 6, 2, 5, 2
    block = SlstmBlock(width, heads, ffn=4, conv_kernel=2, block=0, blocks=1).double()
    with torch.no_grad():
        block.r_weight.normal_(0.0, 0.5)
    pre = torch.randn(batch, length, 4, width, dtype=DOUBLE) * 2
    got = block.recurrence(pre)
    dim, r = width // heads, block.r_weight.tolist()
    for b in range(batch):
        h, c, n, m = [0.0] * width, [0.0] * width, [0.0] * width, [0.0] * width
        for t in range(length):
            new_h = []
            for unit in range(width):
                head, j = divmod(unit, dim)
                raw = [pre[b, t, g, unit].item() + sum(
                    r[g][head][j][kk] * h[head * dim + kk] for kk in range(dim))
                    for g in range(4)]
                lf, z = log_sigmoid(raw[1]), math.tanh(raw[2])
                if t == 0:
                    m[unit], c[unit], n[unit] = raw[0], z, 1.0
                else:
                    m_new = max(raw[0], lf + m[unit])
                    ip, fp = math.exp(raw[0] - m_new), math.exp(lf + m[unit] - m_new)
                    m[unit], c[unit], n[unit] = m_new, fp * c[unit] + ip * z, fp * n[unit] + ip
                new_h.append(c[unit] / n[unit] / (1.0 + math.exp(-raw[3])))
            h = new_h
            for unit in range(width):
                assert got[b, t, unit].item() == pytest.approx(h[unit], abs=1e-12), (b, t, unit)


def tiny() -> Xlstm:
    """An mLSTM block then the sLSTM block, in double, with the gate and recurrent weights (0 at
    init) drawn so that every path carries gradient."""
    torch.manual_seed(14)
    model = Xlstm(window=5, features=3, outputs=2, d_model=8, heads=2, blocks=2, slstm_at=1,
                  inner=16, ffn=12).double()
    with torch.no_grad():
        model.blocks[0].gate.weight.normal_(0.0, 0.3)
        model.blocks[1].r_weight.normal_(0.0, 0.3)
    return model


@pytest.fixture
def one_thread():
    """One intra-op thread for the duration of a test, restored after: on tensors this small the
    thread pool only adds overhead (~30x on a loaded 2-core host), and gradcheck runs thousands
    of forwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_gradients_match_finite_differences(one_thread):
    model = tiny()
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())
    x = torch.randn(2, 5, 3, dtype=DOUBLE, requires_grad=True)

    def forward(inputs, *values):
        return torch.func.functional_call(model, dict(zip(names, values)), (inputs,))

    assert torch.autograd.gradcheck(forward, (x, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


def slab_tensors(D=64, NH=4, blocks=4, slstm_at=1, K=4, features=32, outputs=1):
    """(elements, decays) of lib/models/xlstm/xlstm_config.cpp's xlstm_tensor_specs, with its
    XlstmConfig's widths: Di = 2 D and Dff = ceil(1.3 D) rounded up to multiples of 64."""
    Di = (2 * D + 63) // 64 * 64
    Dff = ((13 * D + 9) // 10 + 63) // 64 * 64
    DHs = D // NH
    tensors = [(D * features, True), (D, False)]
    for b in range(blocks):
        if b == slstm_at:
            tensors += [(D, False), (D * K, False), (D, False), (4 * NH * DHs * DHs, True),
                        (4 * NH * DHs * DHs, True), (4 * D, False), (D, False), (D, False),
                        (2 * Dff * D, True), (D * Dff, True)]
        else:
            tensors += [(D, False), (2 * Di * D, True), (Di * K, False), (Di, False),
                        (Di // 4 * 16, True), (Di // 4 * 16, True), (Di // 4 * 16, True),
                        (2 * NH * 3 * Di, True), (2 * NH, False), (Di, False), (Di, False),
                        (D * Di, True)]
    return tensors + [(D, False), (outputs * D, True), (outputs, False)]


def test_the_reference_configuration_matches_the_slab():
    model = MODELS["xlstm"](64, 32, 1)
    assert model.config == dict(d_model=64, heads=4, inner=128, blocks=4, slstm_at=1, ffn=128)
    tensors = slab_tensors()
    assert model.parameter_count() == sum(n for n, _ in tensors)
    decayed = sum(p.numel() for n, p in model.named_parameters() if model.decays(n, p))
    assert decayed == sum(n for n, decays in tensors if decays)
    print(f"{model.describe()}; {decayed} decayed")


def test_a_train_step_at_the_bench_config():
    """Forward/backward at L = 64, F = 32 (batch 4): every parameter gets a finite gradient, and
    AdamW steps on one batch lower its loss."""
    torch.manual_seed(2)
    model = MODELS["xlstm"](64, 32, 1)
    x, y = torch.randn(4, 64, 32), torch.randn(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        for name, param in model.named_parameters():
            assert param.grad is not None and torch.isfinite(param.grad).all(), name
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


def test_the_script_writes_rows_on_the_cpu(tmp_path):
    out = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench/pytorch/supervised_models.py"), "--device", "cpu",
         "--models", "xlstm", "--variants", "eager", "--repetitions", "3", "--iterations", "1",
         "--warmup", "1", "--batch", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    run = load_run(out)
    assert [row.aggregate for row in run.rows] == [None, None, None, "median", "min", "max"]
    summary = summarize_run(run).measured["supervised_step/pytorch_eager/model:xlstm"]
    assert summary.repetitions == 3 and summary.counters["batch"] == 2
    assert summary.counters["parameters"] == sum(n for n, _ in slab_tensors())
