"""Plain PyTorch versions of resident's supervised models (shared/MODELS.md), for the
side-by-side rows of bench/pytorch/supervised_models.py: the same algebra and configuration as
the resident models, written the way a PyTorch user would write them (no custom kernels).

Every model maps a batch x [batch, window, features] (time-major windows, as
lib/models/supervised_model.h) to predictions [batch, outputs], and is built on the CPU from a
seed (torch.manual_seed) before it is moved to a device. To add a model: write one subclass of
SupervisedModel with a ``name`` and the constructor signature (window, features, outputs,
**config), and add it to MODELS at the end of this file.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class SupervisedModel(nn.Module):
    """The interface of the models in MODELS: ``forward(x [B, L, F]) -> [B, outputs]``."""

    name = ""

    def describe(self) -> str:
        """A one-line description of the configuration, for the rows' labels."""
        raise NotImplementedError

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def decays(self, name: str, parameter: nn.Parameter) -> bool:
        """Whether AdamW's weight decay applies to a parameter: the weight matrices (>= 2-D),
        as resident's slabs declare them; a model overrides this for exceptions."""
        return parameter.dim() >= 2


# --------------------------------------------------------------------------------------------
# KAN (MODELS.md section 4): efficient-kan's KANLinear, tanh squashing in front of every layer.


class KanLinear(nn.Module):
    """efficient-kan's KANLinear: y = SiLU(x) W_b^T + flat(B(x)) (W_s * s[..., None])^T, with
    B(x) the G + k B-spline bases of order k on a uniform grid of G intervals over
    ``grid_range``, extended by k knots on each side (knots t_m = lo + (m - k) h)."""

    def __init__(self, in_features: int, out_features: int, grid_size: int = 5,
                 spline_order: int = 3, grid_range: tuple[float, float] = (-1.0, 1.0),
                 scale_noise: float = 0.1, scale_base: float = 1.0, scale_spline: float = 1.0):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.grid_size, self.spline_order = grid_size, spline_order
        step = (grid_range[1] - grid_range[0]) / grid_size
        knots = torch.arange(-spline_order, grid_size + spline_order + 1) * step + grid_range[0]
        self.register_buffer("grid", knots.expand(in_features, -1).contiguous())
        self.base_weight = nn.Parameter(torch.empty(out_features, in_features))
        self.spline_weight = nn.Parameter(
            torch.empty(out_features, in_features, grid_size + spline_order))
        self.spline_scaler = nn.Parameter(torch.empty(out_features, in_features))
        # efficient-kan's reset_parameters (enable_standalone_scale_spline=True).
        nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5) * scale_base)
        with torch.no_grad():
            noise = (torch.rand(grid_size + 1, in_features, out_features) - 0.5) \
                * scale_noise / grid_size
            self.spline_weight.copy_(self._curve_to_coefficients(
                self.grid.T[spline_order:-spline_order], noise))
        nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5) * scale_spline)

    def b_splines(self, x: torch.Tensor) -> torch.Tensor:
        """The bases B(x) [N, in, G + k] of x [N, in] (Cox-de Boor, as efficient-kan). Zero
        outside the extended knot range."""
        grid = self.grid
        x = x.unsqueeze(-1)
        bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
        for k in range(1, self.spline_order + 1):
            bases = ((x - grid[:, :-(k + 1)]) / (grid[:, k:-1] - grid[:, :-(k + 1)])
                     * bases[:, :, :-1]) \
                + ((grid[:, k + 1:] - x) / (grid[:, k + 1:] - grid[:, 1:(-k)]) * bases[:, :, 1:])
        return bases.contiguous()

    def _curve_to_coefficients(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """efficient-kan's curve2coeff: least-squares spline coefficients [out, in, G + k]
        through the points (x [m, in], y [m, in, out])."""
        design = self.b_splines(x).transpose(0, 1)
        solution = torch.linalg.lstsq(design, y.transpose(0, 1)).solution
        return solution.permute(2, 0, 1).contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base = F.linear(F.silu(x), self.base_weight)
        scaled = self.spline_weight * self.spline_scaler.unsqueeze(-1)
        spline = F.linear(self.b_splines(x).view(x.size(0), -1),
                          scaled.view(self.out_features, -1))
        return base + spline


class Kan(SupervisedModel):
    """[L*F -> hidden... -> outputs] of KanLinear layers on the flattened window; each layer's
    input is squashed by tanh into the grid's range (the spline branch is 0 outside it)."""

    name = "kan"

    def __init__(self, window: int, features: int, outputs: int,
                 hidden: tuple[int, ...] = (64, 32), grid_size: int = 5, spline_order: int = 3):
        super().__init__()
        self.widths = [window * features, *hidden, outputs]
        self.grid_size, self.spline_order = grid_size, spline_order
        self.layers = nn.ModuleList(KanLinear(a, b, grid_size, spline_order)
                                    for a, b in zip(self.widths, self.widths[1:]))

    def decays(self, name: str, parameter: nn.Parameter) -> bool:
        """The spline scalers are left out, as resident's KAN does."""
        return parameter.dim() >= 2 and not name.endswith("spline_scaler")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.reshape(x.size(0), -1)
        for layer in self.layers:
            h = layer(torch.tanh(h))
        return h

    def describe(self) -> str:
        widths = " -> ".join(map(str, self.widths))
        return (f"kan [{widths}], grid {self.grid_size}, order {self.spline_order} on [-1, 1], "
                f"tanh squash, {self.parameter_count()} parameters")


# --------------------------------------------------------------------------------------------
# Mamba2 (MODELS.md section 1): Mamba2Simple's mixer with the single-chunk SSD in its quadratic
# form, pre-norm residual blocks.


def segment_sums(a: torch.Tensor, strict: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    """ssd_minimal's stable segsum: out[..., t, s] = a[s+1] + ... + a[t] for s <= t (a cumsum
    of masked a, not a difference of cumsums), -inf for s > t. a [..., T]; ``strict`` and
    ``causal`` are the [T, T] lower-triangular masks without and with the diagonal."""
    length = a.size(-1)
    repeated = a.unsqueeze(-1).expand(*a.shape, length).masked_fill(~strict, 0.0)
    return torch.cumsum(repeated, dim=-2).masked_fill(~causal, -torch.inf)


def ssd_single_chunk(x: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                     c: torch.Tensor, d: torch.Tensor, strict: torch.Tensor,
                     causal: torch.Tensor) -> torch.Tensor:
    """Y = ((C B^T) o Lambda) (dt o X) + D X per (batch, head), one chunk of the whole window.

    x [B, L, H, P], dt [B, L, H] (after softplus), a [H] (negative), b and c [B, L, N] (one
    group, shared by the heads), d [H]; returns y [B, L, H, P]. Lambda[t, s] =
    exp(cs_t - cs_s) for s <= t, with cs the cumsum of dt * a over time; 0 above the diagonal.
    """
    decay = torch.exp(segment_sums((dt * a).transpose(1, 2), strict, causal))  # [B, H, L, L]
    scores = torch.einsum("btn,bsn->bts", c, b)                                 # [B, L, L]
    mixing = scores.unsqueeze(1) * decay
    y = torch.einsum("bhts,bshp->bthp", mixing, x * dt.unsqueeze(-1))
    return y + x * d.unsqueeze(-1)


def gated_rms_norm(y: torch.Tensor, z: torch.Tensor, weight: torch.Tensor,
                   eps: float) -> torch.Tensor:
    """layernorm_gated.rms_norm_ref with norm_before_gate=False, one group: the gate first,
    then the RMS norm over the last axis, then the weight."""
    gated = y * F.silu(z)
    return gated * torch.rsqrt(gated.pow(2).mean(-1, keepdim=True) + eps) * weight


class Mamba2Mixer(nn.Module):
    """Mamba2Simple's mixer (ngroups 1, no dt_limit, bias-free projections, conv bias)."""

    def __init__(self, d_model: int, window: int, d_state: int = 32, d_conv: int = 4,
                 expand: int = 2, headdim: int = 32, dt_min: float = 1e-3, dt_max: float = 0.1,
                 dt_init_floor: float = 1e-4, eps: float = 1e-5):
        super().__init__()
        self.d_inner = expand * d_model
        if self.d_inner % headdim:
            raise ValueError(f"expand * d_model = {self.d_inner} is not a multiple of "
                             f"headdim {headdim}")
        self.d_state, self.headdim, self.eps = d_state, headdim, eps
        self.nheads = self.d_inner // headdim
        conv_dim = self.d_inner + 2 * d_state
        self.in_proj = nn.Linear(d_model, self.d_inner + conv_dim + self.nheads, bias=False)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, d_conv, groups=conv_dim, padding=d_conv - 1)
        dt = torch.exp(torch.rand(self.nheads) * (math.log(dt_max) - math.log(dt_min))
                       + math.log(dt_min)).clamp(min=dt_init_floor)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.A_log = nn.Parameter(torch.log(torch.empty(self.nheads).uniform_(1, 16)))
        self.D = nn.Parameter(torch.ones(self.nheads))
        self.norm_weight = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)
        ones = torch.ones(window, window, dtype=torch.bool)
        self.register_buffer("strict", torch.tril(ones, diagonal=-1), persistent=False)
        self.register_buffer("causal", torch.tril(ones), persistent=False)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        batch, length, _ = u.shape
        z, xbc, dt = torch.split(self.in_proj(u),
                                 [self.d_inner, self.d_inner + 2 * self.d_state, self.nheads],
                                 dim=-1)
        xbc = F.silu(self.conv1d(xbc.transpose(1, 2))[..., :length].transpose(1, 2))
        x, b, c = torch.split(xbc, [self.d_inner, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(dt + self.dt_bias)
        y = ssd_single_chunk(x.reshape(batch, length, self.nheads, self.headdim), dt,
                             -torch.exp(self.A_log), b, c, self.D, self.strict, self.causal)
        y = gated_rms_norm(y.reshape(batch, length, self.d_inner), z, self.norm_weight, self.eps)
        return self.out_proj(y)


class Mamba2(SupervisedModel):
    """Linear F -> D, n_layers pre-norm residual blocks h + Mixer(RMSNorm(h)), a final
    RMSNorm, and a Linear head on the last time step."""

    name = "mamba2"

    def __init__(self, window: int, features: int, outputs: int, d_model: int = 64,
                 n_layers: int = 2, expand: int = 2, headdim: int = 32, d_state: int = 32,
                 d_conv: int = 4, eps: float = 1e-5):
        super().__init__()
        self.config = dict(d_model=d_model, n_layers=n_layers, expand=expand, headdim=headdim,
                           d_state=d_state, d_conv=d_conv)
        self.embed = nn.Linear(features, d_model)
        self.norms = nn.ModuleList(nn.RMSNorm(d_model, eps=eps) for _ in range(n_layers))
        self.mixers = nn.ModuleList(
            Mamba2Mixer(d_model, window, d_state, d_conv, expand, headdim, eps=eps)
            for _ in range(n_layers))
        self.norm_f = nn.RMSNorm(d_model, eps=eps)
        self.head = nn.Linear(d_model, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for norm, mixer in zip(self.norms, self.mixers):
            h = h + mixer(norm(h))
        return self.head(self.norm_f(h[:, -1]))

    def describe(self) -> str:
        c = self.config
        return (f"mamba2 D {c['d_model']}, {c['n_layers']} layers, expand {c['expand']}, "
                f"headdim {c['headdim']}, d_state {c['d_state']}, d_conv {c['d_conv']}, "
                f"single-chunk SSD, {self.parameter_count()} parameters")


# --------------------------------------------------------------------------------------------
# Liquid CfC (MODELS.md section 5): ncps' CfCCell with a one-layer backbone, the "default" cell
# ("pure" as an option), looped over the window in Python as ncps' CfC does; a Linear readout
# on the last state.


class CfcCell(nn.Module):
    """One step: z = 1.7159 tanh(0.666 backbone([u; h])), then the cell's heads on z.
    default: h' = f1 (1 - s) + s f2, f1 = tanh(ff1 z), f2 = tanh(ff2 z),
             s = sigmoid(time_a(z) ts + time_b(z));
    pure:    h' = -A exp(-ts (|w_tau| + |f|)) f + A, f = ff1 z (no tanh)."""

    def __init__(self, input_size: int, hidden: int, units: int, mode: str = "default"):
        super().__init__()
        if mode not in ("default", "pure"):
            raise ValueError(f"mode {mode!r}, allowed 'default' or 'pure'")
        self.mode = mode
        self.backbone = nn.Linear(input_size + hidden, units)
        self.ff1 = nn.Linear(units, hidden)
        if mode == "pure":
            self.w_tau = nn.Parameter(torch.zeros(hidden))
            self.A = nn.Parameter(torch.ones(hidden))
        else:
            self.ff2 = nn.Linear(units, hidden)
            self.time_a = nn.Linear(units, hidden)
            self.time_b = nn.Linear(units, hidden)
        for weight in self.parameters():  # ncps' init_weights: xavier on the 2-D weights
            if weight.dim() == 2:
                nn.init.xavier_uniform_(weight)

    def forward(self, u: torch.Tensor, h: torch.Tensor, ts) -> torch.Tensor:
        z = 1.7159 * torch.tanh(0.666 * self.backbone(torch.cat([u, h], 1)))
        if self.mode == "pure":
            f = self.ff1(z)
            return -self.A * torch.exp(-ts * (self.w_tau.abs() + f.abs())) * f + self.A
        f1, f2 = torch.tanh(self.ff1(z)), torch.tanh(self.ff2(z))
        s = torch.sigmoid(self.time_a(z) * ts + self.time_b(z))
        return f1 * (1.0 - s) + s * f2


class Cfc(SupervisedModel):
    """The CfC cell over the window from h = 0, then Linear(hidden -> outputs) on the last
    state. ``time_column`` names the input column holding each step's elapsed time (irregular
    sampling); None gives ts = 1. The column stays an input of the backbone."""

    name = "cfc"

    def __init__(self, window: int, features: int, outputs: int, hidden: int = 64,
                 units: int = 128, mode: str = "default", time_column: int | None = None):
        super().__init__()
        self.hidden, self.units, self.mode, self.time_column = hidden, units, mode, time_column
        self.cell = CfcCell(features, hidden, units, mode)
        self.readout = nn.Linear(hidden, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], self.hidden)
        for t in range(x.shape[1]):
            ts = 1.0 if self.time_column is None else x[:, t, self.time_column].unsqueeze(1)
            h = self.cell(x[:, t], h, ts)
        return self.readout(h)

    def describe(self) -> str:
        ts = "ts = 1" if self.time_column is None else f"ts from column {self.time_column}"
        return (f"cfc {self.mode} H {self.hidden}, U {self.units}, backbone 1 layer, {ts}, "
                f"{self.parameter_count()} parameters")


# --------------------------------------------------------------------------------------------
# Diffusion (MODELS.md section 6): DDPM with epsilon prediction, the schedule in double then cast
# to float, a residual MLP denoiser conditioned on an embedding of the history window, the
# ancestral sampler without clipping (z-scored data) and with the posterior variance.


def diffusion_schedule(kind: str, steps: int) -> dict[str, torch.Tensor]:
    """The schedule's per-step tensors (float32): linear (lucidrains' 1000 / T scaling of
    1e-4 -> 0.02, clipped at 0.999) or cosine (s = 0.008, beta clipped to [0, 0.999], alpha_bar the product of the
    clipped alphas)."""
    if kind == "linear":
        scale = 1000.0 / steps
        beta = torch.linspace(1e-4 * scale, 0.02 * scale, steps, dtype=torch.float64)
        beta = beta.clamp(max=0.999)  # T <= 20 would reach beta >= 1
    else:
        u = torch.arange(steps + 1, dtype=torch.float64)
        f = torch.cos((u / steps + 0.008) / 1.008 * math.pi / 2) ** 2
        beta = (1 - f[1:] / f[:-1]).clamp(0, 0.999)
    alpha = 1 - beta
    alpha_bar = torch.cumprod(alpha, 0)
    prev = torch.cat([alpha_bar.new_ones(1), alpha_bar[:-1]])
    posterior_variance = beta * (1 - prev) / (1 - alpha_bar)
    table = {"beta": beta, "alpha_bar": alpha_bar, "sqrt_alpha_bar": alpha_bar.sqrt(),
             "sqrt_one_minus_alpha_bar": (1 - alpha_bar).sqrt(),
             "sqrt_recip_alpha_bar": (1 / alpha_bar).sqrt(),
             "sqrt_recip_alpha_bar_minus_one": (1 / alpha_bar - 1).sqrt(),
             "c1": beta * prev.sqrt() / (1 - alpha_bar),
             "c2": (1 - prev) * alpha.sqrt() / (1 - alpha_bar),
             "sigma": posterior_variance.sqrt()}
    return {name: value.float() for name, value in table.items()}


def time_sinusoid(t: torch.Tensor, dim: int) -> torch.Tensor:
    """[sin(t w_k), cos(t w_k)], w_k = exp(-k ln(1e4) / (dim/2 - 1)), for integer t [rows]."""
    half = dim // 2
    w = torch.exp(-torch.arange(half, device=t.device, dtype=torch.float64) * math.log(1e4)
                  / (half - 1))
    arg = t.to(torch.float64)[:, None] * w[None]
    return torch.cat([arg.sin(), arg.cos()], dim=1).float()


class DiffusionBlock(nn.Module):
    """h + fc2(silu(fc1(LN(h)) + temb))."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1, self.fc2 = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, h: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        return h + self.fc2(F.silu(self.fc1(self.norm(h)) + temb))


class Diffusion(SupervisedModel):
    """eps_hat(x_t, t, window): input([x_t | cond | temb]) through ``blocks`` DiffusionBlocks and
    an output Linear; cond = MLP(flat window) (Linear, SiLU, Linear), temb = MLP(sinusoid(t))
    (Linear, GELU tanh, Linear). Trains on the epsilon-MSE at drawn t and eps
    (``training_loss``); ``sample`` runs the T-step ancestral sampler; forward is the mean of
    ``samples`` sampled forecasts. The linear schedule by default, as resident's: the cosine
    schedule's clipped last beta (0.999) amplifies the first sampler step's error by ~32 when
    x0 is not clipped (z-scored data)."""

    name = "diffusion"

    def __init__(self, window: int, features: int, outputs: int, steps: int = 200,
                 width: int = 256, blocks: int = 3, time_dim: int = 64,
                 schedule: str = "linear", samples: int = 8):
        super().__init__()
        self.steps, self.width, self.time_dim, self.samples = steps, width, time_dim, samples
        self.schedule_kind = schedule
        self.time_fc1, self.time_fc2 = nn.Linear(time_dim, width), nn.Linear(width, width)
        self.cond_fc1 = nn.Linear(window * features, width)
        self.cond_fc2 = nn.Linear(width, width)
        self.input = nn.Linear(outputs + 2 * width, width)
        self.blocks = nn.ModuleList(DiffusionBlock(width) for _ in range(blocks))
        self.output = nn.Linear(width, outputs)
        for name, value in diffusion_schedule(schedule, steps).items():
            self.register_buffer(name, value, persistent=False)

    def time_embedding(self, t: torch.Tensor) -> torch.Tensor:
        s = time_sinusoid(t, self.time_dim).to(self.time_fc1.weight.dtype)
        return self.time_fc2(F.gelu(self.time_fc1(s), approximate="tanh"))

    def condition(self, x: torch.Tensor) -> torch.Tensor:
        return self.cond_fc2(F.silu(self.cond_fc1(x.flatten(1))))

    def denoise(self, x_t: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        temb = self.time_embedding(t)
        h = self.input(torch.cat([x_t, cond, temb], dim=1))
        for block in self.blocks:
            h = block(h, temb)
        return self.output(h)

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = torch.randint(0, self.steps, (x.shape[0],), device=x.device)
        eps = torch.randn_like(y)
        x_t = self.sqrt_alpha_bar[t, None] * y + self.sqrt_one_minus_alpha_bar[t, None] * eps
        return F.mse_loss(self.denoise(x_t, t, self.condition(x)), eps)

    def sampler_step(self, x_t: torch.Tensor, t: torch.Tensor, cond: torch.Tensor,
                     z: torch.Tensor) -> torch.Tensor:
        """x_{t-1} from x_t at the timesteps t [rows] (all equal), z the step's noise."""
        eps = self.denoise(x_t, t, cond)
        x0 = (self.sqrt_recip_alpha_bar[t, None] * x_t
              - self.sqrt_recip_alpha_bar_minus_one[t, None] * eps)
        mean = self.c1[t, None] * x0 + self.c2[t, None] * x_t
        return mean + (t > 0).to(x_t.dtype)[:, None] * self.sigma[t, None] * z

    def sample(self, x: torch.Tensor, samples: int) -> torch.Tensor:
        """samples [batch, samples, outputs] for windows x [batch, L, F]."""
        cond = self.condition(x).repeat_interleave(samples, 0)
        rows = cond.shape[0]
        x_t = torch.randn(rows, self.output.out_features, device=x.device, dtype=cond.dtype)
        step = getattr(self, "compiled_sampler_step", self.sampler_step)
        for t in reversed(range(self.steps)):
            t_rows = torch.full((rows,), t, device=x.device, dtype=torch.long)
            x_t = step(x_t, t_rows, cond, torch.randn_like(x_t))
        return x_t.view(x.shape[0], samples, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sample(x, self.samples).mean(dim=1)

    def describe(self) -> str:
        return (f"diffusion T={self.steps} {self.schedule_kind}, denoiser width {self.width} x "
                f"{len(self.blocks)} blocks, time {self.time_dim}, {self.parameter_count()} "
                f"parameters")


# --------------------------------------------------------------------------------------------
# TLOB (MODELS.md section 7): BiN, alternating temporal / feature attention layers, shrinking head;
# tests/reference/tlob_reference.h states the model (Q, K, V Linears and W0 around a plain
# softmax attention, post-norm, MLP d -> 4d -> out with tanh-GELU, the layer input added back when
# out == d; the last layer's [H/4, L/4] output flattened as is).


class Bin(nn.Module):
    """Bilinear normalization of a window [B, L, F]: y1 (l1[t] z_feature + b1[t]) +
    y2 (l2[f] z_temporal + b2[f]), unbiased stds, a std below 1e-4 counted as 1."""

    def __init__(self, window: int, features: int):
        super().__init__()
        self.l1 = nn.Parameter(torch.randn(window) * math.sqrt(2.0 / (window + 1)))
        self.b1 = nn.Parameter(torch.zeros(window))
        self.l2 = nn.Parameter(torch.randn(features) * math.sqrt(2.0 / (features + 1)))
        self.b2 = nn.Parameter(torch.zeros(features))
        self.y1 = nn.Parameter(torch.full((1,), 0.5))
        self.y2 = nn.Parameter(torch.full((1,), 0.5))

    @staticmethod
    def zscore(x: torch.Tensor, dim: int) -> torch.Tensor:
        std = x.std(dim=dim, keepdim=True)
        std = torch.where(std < 1e-4, torch.ones_like(std), std)
        return (x - x.mean(dim=dim, keepdim=True)) / std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.l1[:, None] * self.zscore(x, 2) + self.b1[:, None]
        x2 = self.l2 * self.zscore(x, 1) + self.b2
        return self.y1 * x1 + self.y2 * x2


class TlobLayer(nn.Module):
    def __init__(self, width: int, out: int, heads: int):
        super().__init__()
        self.width, self.out, self.heads = width, out, heads
        self.qkv = nn.Linear(width, 3 * width * heads)
        self.w0 = nn.Linear(width * heads, width)
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.width).permute(2, 0, 3, 1, 4)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.width), dim=-1)
        a = (p @ v).transpose(1, 2).reshape(b, t, self.heads * self.width)
        y = self.norm(self.w0(a) + x)
        m = self.fc2(F.gelu(self.fc1(y), approximate="tanh"))
        return m + x if self.out == self.width else m


class Tlob(SupervisedModel):
    """A classifier: 3 trend logits (down, stationary, up) per window; trained with
    cross-entropy (``classifier``)."""

    name = "tlob"
    classifier = True

    def __init__(self, window: int, features: int, outputs: int, hidden: int = 64,
                 pairs: int = 4, heads: int = 1, head_limit: int = 128):
        super().__init__()
        del outputs  # a classifier's outputs are its 3 classes
        self.window, self.hidden, self.pairs, self.heads = window, hidden, pairs, heads
        self.bin = Bin(window, features)
        self.embed = nn.Linear(features, hidden)
        t = torch.arange(window, dtype=torch.float64)[:, None]
        rate = torch.pow(10000.0, 2 * torch.arange(hidden // 2, dtype=torch.float64) / hidden)
        pos = torch.zeros(window, hidden, dtype=torch.float64)
        pos[:, 0::2], pos[:, 1::2] = torch.sin(t / rate), torch.cos(t / rate)
        self.register_buffer("pos", pos.float())
        layers = []
        for k in range(2 * pairs):
            width = hidden if k % 2 == 0 else window
            layers.append(TlobLayer(width, width // 4 if k // 2 == pairs - 1 else width, heads))
        self.layers = nn.ModuleList(layers)
        widths = [(hidden // 4) * (window // 4)]
        while widths[-1] > head_limit:
            widths.append(widths[-1] // 4)
        self.head = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:] + [3]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(self.bin(x)) + self.pos
        for k, layer in enumerate(self.layers):
            h = layer(h)
            if k + 1 < len(self.layers):
                h = h.transpose(1, 2)
        h = h.flatten(1)
        for j, linear in enumerate(self.head):
            h = linear(h)
            if j + 1 < len(self.head):
                h = F.gelu(h, approximate="tanh")
        return h

    def describe(self) -> str:
        return (f"tlob H {self.hidden}, {self.pairs} layer pairs, {self.heads} head(s), "
                f"{self.parameter_count()} parameters")


# --------------------------------------------------------------------------------------------
# xLSTM (MODELS.md section 2): NX-AI/xlstm's mLSTM blocks (the cell in its parallel stabilized
# form over the whole window) and one sLSTM block (its recurrence a Python loop over the window),
# pre-norm residual blocks, a post-blocks LayerNorm and a Linear readout on the last step.
# tests/reference/xlstm_reference.h states the model; the tensors are those of
# lib/models/xlstm/xlstm_config.cpp (same count; the same shapes but the convs' [C, 1, K], as
# nn.Conv1d keeps them), initialised as its xlstm_initial_values does (the same distributions,
# drawn from torch's generator).

XLSTM_NORM_EPS = 1e-5
"""Every LayerNorm's and per-head GroupNorm's eps (kXlstmNormEps)."""
XLSTM_QKV_BLOCK = 4
"""The mLSTM's q, k, v projections are block-diagonal with 4 x 4 blocks."""


def headwise(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """NX-AI's LinearHeadwiseExpand (no bias): x [..., nb * bi], weight [nb, bo, bi] ->
    y [..., nb * bo] with y[blk * bo + o] = sum_i weight[blk, o, i] x[blk * bi + i]."""
    blocks, _, inputs = weight.shape
    y = torch.einsum("...ni,noi->...no", x.unflatten(-1, (blocks, inputs)), weight)
    return y.flatten(-2)


def causal_conv_silu(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """SiLU(causal depthwise conv) of x [B, L, C]: y_t = b + sum_k w[k] x_{t-K+1+k}, zeros
    before the window (``conv`` pads K - 1 on both sides; the last K - 1 outputs are dropped)."""
    return F.silu(conv(x.transpose(1, 2))[..., :x.shape[1]].transpose(1, 2))


def mlstm_cell_parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, igate: torch.Tensor,
                        fgate: torch.Tensor, causal: torch.Tensor, eps: float) -> torch.Tensor:
    """The mLSTM cell over a window, parallel stabilized form (NX-AI's
    parallel_stabilized_simple): q, k, v [..., L, DH], igate, fgate [..., L] pre-activations,
    ``causal`` the [L, L] lower-triangular mask with the diagonal; returns h [..., L, DH].

    F_t = sum_{j <= t} logsigmoid(f~_j); logD_ts = F_t - F_s + i~_s (s <= t, else -inf);
    m_t = max_s logD_ts; C_ts = (q_t . k_s / sqrt(DH)) exp(logD_ts - m_t) (exp args <= 0);
    n_t = max(|sum_s C_ts|, exp(-m_t)); h_t = sum_s C_ts v_s / (n_t + eps). Autograd
    differentiates through m as well (the exact gradient; resident's backward holds m constant,
    which differs by O(eps))."""
    cumulative = torch.cumsum(F.logsigmoid(fgate), dim=-1)
    log_d = cumulative.unsqueeze(-1) - cumulative.unsqueeze(-2) + igate.unsqueeze(-2)
    log_d = log_d.masked_fill(~causal, -torch.inf)
    m = log_d.amax(dim=-1, keepdim=True)  # finite: the diagonal is never masked
    scores = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5) * torch.exp(log_d - m)
    n = torch.maximum(scores.sum(dim=-1, keepdim=True).abs(), torch.exp(-m))
    return (scores / (n + eps)) @ v


class MlstmBlock(nn.Module):
    """h + mLSTM(LN(h)): up-projection D -> [x_m | z] (2 Di), x_c = SiLU(conv(x_m)), q, k from
    x_c and v from x_m (headwise 4 x 4), gates [i~ | f~] = Linear([q, k, v]) (NH input gates,
    then NH forget gates), the cell per head, a per-head GroupNorm times ``outnorm_weight``,
    (that + skip * x_c) * SiLU(z), the down-projection Di -> D."""

    def __init__(self, d_model: int, inner: int, heads: int, conv_kernel: int, window: int,
                 blocks: int, cell_eps: float):
        super().__init__()
        if inner % heads or inner % XLSTM_QKV_BLOCK:
            raise ValueError(f"inner = {inner}, allowed a multiple of {XLSTM_QKV_BLOCK} and of "
                             f"heads = {heads}")
        self.inner, self.heads, self.cell_eps = inner, heads, cell_eps
        self.norm = nn.LayerNorm(d_model, eps=XLSTM_NORM_EPS, bias=False)
        self.up = nn.Linear(d_model, 2 * inner, bias=False)
        self.conv = nn.Conv1d(inner, inner, conv_kernel, groups=inner, padding=conv_kernel - 1)
        shape = (inner // XLSTM_QKV_BLOCK, XLSTM_QKV_BLOCK, XLSTM_QKV_BLOCK)
        self.q_weight, self.k_weight, self.v_weight = (nn.Parameter(torch.empty(shape))
                                                       for _ in range(3))
        self.gate = nn.Linear(3 * inner, 2 * heads)
        self.outnorm_weight = nn.Parameter(torch.ones(inner))
        self.skip = nn.Parameter(torch.ones(inner))
        self.down = nn.Linear(inner, d_model, bias=False)
        ones = torch.ones(window, window, dtype=torch.bool)
        self.register_buffer("causal", torch.tril(ones), persistent=False)
        small = math.sqrt(2.0 / (5.0 * d_model))
        with torch.no_grad():  # xlstm_initial_values; the conv keeps torch's U(+-1/sqrt(K))
            for weight in (self.up.weight, self.q_weight, self.k_weight, self.v_weight):
                weight.normal_(0.0, small)
            self.down.weight.normal_(0.0, 2.0 / (blocks * math.sqrt(d_model)))
            self.gate.weight.zero_()
            self.gate.bias[:heads].normal_(0.0, 0.1)
            self.gate.bias[heads:].copy_(torch.linspace(3.0, 6.0, heads))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        batch, length, _ = h.shape
        x_m, z = self.up(self.norm(h)).chunk(2, dim=-1)
        x_c = causal_conv_silu(self.conv, x_m)
        q, k, v = (headwise(x_c, self.q_weight), headwise(x_c, self.k_weight),
                   headwise(x_m, self.v_weight))
        igate, fgate = self.gate(torch.cat([q, k, v], dim=-1)).transpose(1, 2).chunk(2, dim=1)

        def per_head(t):  # [B, L, Di] -> [B, NH, L, DH]
            return t.view(batch, length, self.heads, -1).transpose(1, 2)

        cell = mlstm_cell_parallel(per_head(q), per_head(k), per_head(v), igate, fgate,
                                   self.causal, self.cell_eps)
        grouped = F.layer_norm(cell, cell.shape[-1:], eps=XLSTM_NORM_EPS)
        grouped = grouped.transpose(1, 2).reshape(batch, length, self.inner)
        return h + self.down((self.outnorm_weight * grouped + self.skip * x_c) * F.silu(z))


class SlstmBlock(nn.Module):
    """h + sLSTM(LN(h)), then h + FFN(LN(h)). sLSTM: x_c = SiLU(conv(u)); gate inputs
    W_i x_c, W_f x_c, W_z u, W_o u (headwise [NH, DHs, DHs] each); per step raw = Wx + R h_{t-1}
    + b (R headwise too); the stabilized cell (m_0 = i~_0, c_0 = tanh z~_0, n_0 = 1); h_t =
    sigmoid(o~) c_t / n_t; a per-head GroupNorm times ``outnorm_weight``. FFN: gated GeLU
    (tanh approximation), GeLU(g) * a with [g | a] = u W_up^T, then W_down; no biases."""

    def __init__(self, d_model: int, heads: int, ffn: int, conv_kernel: int, block: int,
                 blocks: int):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model = {d_model}, allowed a multiple of heads = {heads}")
        self.d_model, self.heads = d_model, heads
        head_dim = d_model // heads
        self.norm = nn.LayerNorm(d_model, eps=XLSTM_NORM_EPS, bias=False)
        self.conv = nn.Conv1d(d_model, d_model, conv_kernel, groups=d_model,
                              padding=conv_kernel - 1)
        # Gates in the order i, f, z, o.
        self.w_weight = nn.Parameter(torch.empty(4, heads, head_dim, head_dim))
        self.r_weight = nn.Parameter(torch.zeros(4, heads, head_dim, head_dim))
        self.bias = nn.Parameter(torch.zeros(4, d_model))
        self.outnorm_weight = nn.Parameter(torch.ones(d_model))
        self.ffn_norm = nn.LayerNorm(d_model, eps=XLSTM_NORM_EPS, bias=False)
        self.ffn_up = nn.Linear(d_model, 2 * ffn, bias=False)
        self.ffn_down = nn.Linear(ffn, d_model, bias=False)
        small = math.sqrt(2.0 / (5.0 * d_model))
        ratio = block / (blocks - 1) if blocks > 1 else 0.0
        unit = torch.arange(head_dim, dtype=torch.float64)
        fraction = unit / (head_dim - 1) if head_dim > 1 else torch.zeros_like(unit)
        with torch.no_grad():  # xlstm_initial_values; the conv keeps torch's U(+-1/sqrt(K))
            self.w_weight.normal_(0.0, small)
            self.ffn_up.weight.normal_(0.0, small)
            self.ffn_down.weight.normal_(0.0, 2.0 / (blocks * math.sqrt(d_model)))
            forget = 5.0 - 12.0 * fraction.pow(0.3 + 1.3 * ratio)
            self.bias[1].copy_(forget.repeat(heads).float())

    def recurrence(self, pre: torch.Tensor) -> torch.Tensor:
        """The cell over the window, step by step: pre [B, L, 4, D] (W x + b) -> h [B, L, D].
        Every exp argument is <= 0 (m_t is the running max)."""
        batch, length, _, width = pre.shape
        states = []
        for t in range(length):
            raw = pre[:, t]
            if t > 0:  # h_{-1} = 0: no recurrent term on the first step
                heads = h.view(batch, self.heads, -1)
                raw = raw + torch.einsum("bnk,gnjk->bgnj", heads, self.r_weight).reshape(
                    batch, 4, width)
            igate, fgate, zgate, ogate = raw.unbind(dim=1)
            log_f, z = F.logsigmoid(fgate), torch.tanh(zgate)
            if t == 0:
                m, c, n = igate, z, torch.ones_like(z)
            else:
                m_new = torch.maximum(igate, log_f + m)
                i_p, f_p = torch.exp(igate - m_new), torch.exp(log_f + m - m_new)
                m, c, n = m_new, f_p * c + i_p * z, f_p * n + i_p
            h = torch.sigmoid(ogate) * c / n
            states.append(h)
        return torch.stack(states, dim=1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        batch, length, width = h.shape
        u = self.norm(h)
        x_c = causal_conv_silu(self.conv, u)
        gate_inputs = (x_c, x_c, u, u)
        pre = torch.stack([headwise(x, self.w_weight[g]) for g, x in enumerate(gate_inputs)],
                          dim=2) + self.bias
        cell = self.recurrence(pre).view(batch, length, self.heads, -1)
        grouped = F.layer_norm(cell, cell.shape[-1:], eps=XLSTM_NORM_EPS).view(batch, length,
                                                                               width)
        h = h + self.outnorm_weight * grouped
        gated, linear = self.ffn_up(self.ffn_norm(h)).chunk(2, dim=-1)
        return h + self.ffn_down(F.gelu(gated, approximate="tanh") * linear)


class Xlstm(SupervisedModel):
    """Linear F -> D, ``blocks`` residual blocks (the sLSTM block at ``slstm_at``, -1 for none;
    mLSTM blocks elsewhere), a LayerNorm without bias and a Linear readout on the last step.
    ``inner`` (Di) and ``ffn`` (the FFN's width) default to resident's rounding: 2 D and 1.3 D
    rounded up to multiples of 64; tests pass smaller ones."""

    name = "xlstm"

    def __init__(self, window: int, features: int, outputs: int, d_model: int = 64,
                 heads: int = 4, blocks: int = 4, slstm_at: int = 1, conv_kernel: int = 4,
                 cell_eps: float = 1e-6, inner: int | None = None, ffn: int | None = None):
        super().__init__()
        if not -1 <= slstm_at < blocks:
            raise ValueError(f"slstm_at = {slstm_at}, allowed [-1, {blocks - 1}]")
        inner = inner if inner is not None else (2 * d_model + 63) // 64 * 64
        ffn = ffn if ffn is not None else ((13 * d_model + 9) // 10 + 63) // 64 * 64
        self.config = dict(d_model=d_model, heads=heads, inner=inner, blocks=blocks,
                           slstm_at=slstm_at, ffn=ffn)
        self.embed = nn.Linear(features, d_model)
        self.blocks = nn.ModuleList(
            SlstmBlock(d_model, heads, ffn, conv_kernel, b, blocks) if b == slstm_at
            else MlstmBlock(d_model, inner, heads, conv_kernel, window, blocks, cell_eps)
            for b in range(blocks))
        self.post_norm = nn.LayerNorm(d_model, eps=XLSTM_NORM_EPS, bias=False)
        self.readout = nn.Linear(d_model, outputs)

    def decays(self, name: str, parameter: nn.Parameter) -> bool:
        """resident's slab: the projection and recurrent weights decay; biases (the sLSTM's
        [4, D] one included), norm weights, skip and the conv do not."""
        leaf = name.rsplit(".", 1)[-1]
        return parameter.dim() >= 2 and ".conv." not in name and leaf != "bias"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.readout(self.post_norm(h[:, -1]))

    def describe(self) -> str:
        c = self.config
        slstm = f"sLSTM at {c['slstm_at']}" if c["slstm_at"] >= 0 else "mLSTM only"
        return (f"xlstm D {c['d_model']}, NH {c['heads']}, Di {c['inner']}, {c['blocks']} "
                f"blocks ({slstm}), FFN {c['ffn']}, parallel mLSTM cell, "
                f"{self.parameter_count()} parameters")


# --------------------------------------------------------------------------------------------
# TFT (MODELS.md section 3): pytorch-forecasting's module layout without statics (no context
# vectors, zero initial LSTM state), dropout 0, one LSTM layer, every step an encoder step and the
# last step the query; a quantile head trained with the pinball loss (``training_loss``).
# tests/reference/tft_reference.h states the model; the tensors are those of
# lib/models/tft/tft_init.cpp (same count and shapes but the LSTM's bias split in two, as
# nn.LSTM keeps b_ih and b_hh).

TFT_NORM_EPS = 1e-5
"""Every LayerNorm's eps (kTftNormEps)."""


class TftGateAddNorm(nn.Module):
    """LayerNorm(resid + GLU(a)): the glu Linear's first half the value, the second the gate."""

    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.glu = nn.Linear(inputs, 2 * outputs)
        self.norm = nn.LayerNorm(outputs, eps=TFT_NORM_EPS)

    def forward(self, a: torch.Tensor, resid: torch.Tensor) -> torch.Tensor:
        return self.norm(resid + F.glu(self.glu(a), dim=-1))


class TftGrn(nn.Module):
    """GAN(fc2(ELU(fc1(a))), skip(a)); skip a Linear when the widths differ."""

    def __init__(self, inputs: int, hidden: int, outputs: int):
        super().__init__()
        self.fc1 = nn.Linear(inputs, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.gate = TftGateAddNorm(hidden, outputs)
        self.skip = nn.Linear(inputs, outputs) if inputs != outputs else None

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        resid = a if self.skip is None else self.skip(a)
        return self.gate(self.fc2(F.elu(self.fc1(a))), resid)


class TftVariableGrns(nn.Module):
    """The F per-variable GRNs (in d_c, hidden H, out H, skip Linear) as batched matmuls over
    stacked weights, each ending in the per-variable LayerNorm."""

    def __init__(self, variables: int, inputs: int, hidden: int):
        super().__init__()

        def stacked(*shape, fan_in):
            bound = 1.0 / math.sqrt(fan_in)
            return nn.Parameter(torch.empty(variables, *shape).uniform_(-bound, bound))

        self.fc1_w = stacked(hidden, inputs, fan_in=inputs)
        self.fc1_b = stacked(hidden, fan_in=inputs)
        self.fc2_w = stacked(hidden, hidden, fan_in=hidden)
        self.fc2_b = stacked(hidden, fan_in=hidden)
        self.glu_w = stacked(2 * hidden, hidden, fan_in=hidden)
        self.glu_b = stacked(2 * hidden, fan_in=hidden)
        self.skip_w = stacked(hidden, inputs, fan_in=inputs)
        self.skip_b = stacked(hidden, fan_in=inputs)
        self.gamma = nn.Parameter(torch.ones(variables, hidden))
        self.beta = nn.Parameter(torch.zeros(variables, hidden))

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        """e [..., F, d_c] -> [..., F, H]."""
        def linear(a, w, b):
            return torch.einsum("...ji,joi->...jo", a, w) + b

        eta = linear(F.elu(linear(e, self.fc1_w, self.fc1_b)), self.fc2_w, self.fc2_b)
        r = linear(e, self.skip_w, self.skip_b) + F.glu(linear(eta, self.glu_w, self.glu_b), -1)
        return F.layer_norm(r, r.shape[-1:], eps=TFT_NORM_EPS) * self.gamma + self.beta


class Tft(SupervisedModel):
    """A quantile forecaster: forward gives [B, outputs * quantiles] (quantile fastest);
    ``training_loss`` is the pinball loss, mean over every value; the median column is the
    point forecast (``median``)."""

    name = "tft"

    def __init__(self, window: int, features: int, outputs: int, hidden: int = 32, heads: int = 4,
                 prescale: int = 8, quantiles: tuple = (0.1, 0.5, 0.9)):
        super().__init__()
        assert hidden % heads == 0 and 0.5 in quantiles
        self.hidden, self.heads, self.prescale = hidden, heads, prescale
        self.outputs, self.quantiles = outputs, tuple(quantiles)
        head_width = hidden // heads
        self.prescale_weight = nn.Parameter(torch.empty(features, prescale).uniform_(-1, 1))
        self.prescale_bias = nn.Parameter(torch.empty(features, prescale).uniform_(-1, 1))
        self.vsn_flat = TftGrn(features * prescale, hidden, features)
        self.vsn_var = TftVariableGrns(features, prescale, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.lstm_gate = TftGateAddNorm(hidden, hidden)
        self.enrich = TftGrn(hidden, hidden, hidden)
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, head_width)
        self.out = nn.Linear(head_width, hidden, bias=False)
        self.attn_gate = TftGateAddNorm(hidden, hidden)
        self.ff = TftGrn(hidden, hidden, hidden)
        self.out_gate = TftGateAddNorm(hidden, hidden)
        self.head = nn.Linear(hidden, outputs * len(self.quantiles))

    def forward(self, x: torch.Tensor, details: dict | None = None) -> torch.Tensor:
        batch, window, _ = x.shape
        e = x[..., None] * self.prescale_weight + self.prescale_bias          # [B, L, F, dc]
        v = torch.softmax(self.vsn_flat(e.flatten(2)), dim=-1)               # [B, L, F]
        xi = (v[..., None] * self.vsn_var(e)).sum(dim=2)                      # [B, L, H]
        h, _ = self.lstm(xi)
        phi = self.lstm_gate(h, xi)
        theta = self.enrich(phi)
        dk = self.hidden // self.heads
        q = self.query(theta[:, -1]).view(batch, self.heads, dk)
        k = self.key(theta).view(batch, window, self.heads, dk)
        scores = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(dk)
        # The causal mask: keys at steps <= the query's (the last step: all of them).
        mask = torch.arange(window, device=x.device) > window - 1
        probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        abar = probs.mean(dim=1)                                             # [B, L]
        attn = self.out(torch.einsum("bt,btd->bd", abar, self.value(theta)))
        delta = self.attn_gate(attn, theta[:, -1])
        u = self.out_gate(self.ff(delta), phi[:, -1])
        if details is not None:
            details["selection"], details["attention"] = v, abar
        return self.head(u)

    def training_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Pinball over the levels, mean over batch * outputs * quantiles; y [B, outputs]."""
        pred = self(x).view(x.shape[0], self.outputs, len(self.quantiles))
        taus = torch.tensor(self.quantiles, dtype=pred.dtype, device=pred.device)
        u = y[..., None] - pred
        return torch.maximum(taus * u, (taus - 1) * u).mean()

    def median(self, x: torch.Tensor) -> torch.Tensor:
        """The 0.5 column [B, outputs]: what resident's trainer validates with MSE."""
        pred = self(x).view(x.shape[0], self.outputs, len(self.quantiles))
        return pred[..., self.quantiles.index(0.5)]

    def describe(self) -> str:
        return (f"tft H {self.hidden}, {self.heads} heads, d_c {self.prescale}, quantiles "
                f"{list(self.quantiles)}, {self.parameter_count()} parameters")


MODELS: dict[str, type[SupervisedModel]] = {
    Kan.name: Kan,
    Mamba2.name: Mamba2,
    Cfc.name: Cfc,
    Tlob.name: Tlob,
    Diffusion.name: Diffusion,
    Xlstm.name: Xlstm,
    Tft.name: Tft,
}
"""The registry: name (as resident's model registry spells it) -> model class."""
