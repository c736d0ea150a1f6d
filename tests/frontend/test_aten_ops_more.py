"""The rest of the closed op set through the ATen capture: GELU, comparisons / where / masked_fill, broadcasting,
constant tensor operands, division, indexing by constants, math functions and powers, variance, log-softmax,
LayerNorm (any trailing dims), transposed convolutions, adaptive pooling of any size, F.linear / x @ W on 3+ dims.

Each lowering is checked before/after against torch on random inputs: spikec's interpreter reproduces torch's
float64 forward bit for bit, and the ONNX export run in onnxruntime reproduces the interpreter (spikes identical,
reals within the checker's bound). What cannot be lowered exactly is refused naming the op and a remedy; then a
network per new family compiles end to end (``spikec.compile``, ONNX) with every claim proven."""

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import spikec
import spikec.nn as snc
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend import trace
from spikec.targets.onnx import check_model_against, export

RNG = np.random.default_rng(7)
X4 = RNG.normal(size=(3, 2, 4, 6))            # [T, B, N, D]
XC = RNG.normal(size=(3, 2, 2, 6, 6))         # [T, B, C, H, W]
XL = RNG.normal(size=(3, 2, 4, 8))            # [T, B, C, L]


class Fn(nn.Module):
    def __init__(self, fn, *modules):
        super().__init__()
        self.fn, self.layers = fn, nn.ModuleList(modules)

    def forward(self, x):
        return self.fn(x, *self.layers)


def per_step(x, m):
    """``m`` on each step: T and B merged for it, as users apply a per-step torch layer."""
    return m(x.flatten(0, 1)).unflatten(0, (x.shape[0], x.shape[1]))


def check(model, x):
    """The traced graph in the interpreter against torch's float64 forward, bit for bit, then its ONNX export in
    onnxruntime against the interpreter."""
    model = model.double().eval()
    graph = trace(model, x.shape[2:], input_kind="real")
    got = run(graph, x)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).double().numpy()
    out = got.outputs(graph)[0]
    assert out.shape == ref.shape
    assert np.array_equal(out, ref), np.abs(out - ref).max()
    m = export(graph, x.shape[0])
    onnx.checker.check_model(m, full_check=True)
    result = check_model_against(m, graph, x, got)
    assert result["equivalent"], result["first_mismatches"]
    return graph


def ops(graph):
    return [n.op for n in graph.nodes if n.op != "input"]


W = torch.from_numpy(RNG.normal(size=(5, 6)))
POS = torch.from_numpy(RNG.normal(size=(1, 4, 6)))
CASES = {
    "gelu": (lambda x: F.gelu(x), X4, ["gelu"]),
    "gelu-tanh": (lambda x: F.gelu(x * 3.0, approximate="tanh"), X4, ["scale", "gelu"]),
    "gelu-wide": (lambda x: F.gelu(x * 4.0), X4, ["scale", "gelu"]),   # erf's tail (|x / sqrt 2| > 2) in ONNX
    "heaviside": (lambda x: (x > 0.25).float(), X4, ["compare"]),
    "compare-tensors": (lambda x: (x >= x.flip(-1)).to(x.dtype) + (x < x * 0.5).double(), X4, None),
    "compare-flipped": (lambda x: (0.5 < x) * x, X4, ["compare", "mul"]),
    "where-leaky": (lambda x: torch.where(x > 0, x, 0.1 * x), X4, ["compare", "scale", "where"]),
    "where-scalars": (lambda x: torch.where(x > 0, 1.0, -1.0), X4, None),
    "masked-fill": (lambda x: x.masked_fill(x < 0, -0.5), X4, None),
    "mask-not-and": (lambda x: x * (~(x > 0) & (x > -1)), X4, None),
    "ones-like": (lambda x: x + torch.ones_like(x) - torch.zeros_like(x), X4, None),
    "broadcast-add": (lambda x: x + x[..., :1], X4, ["slice", "expand", "add"]),
    "broadcast-mul": (lambda x: x * x.mean(-1, keepdim=True), X4, ["mean", "expand", "mul"]),
    "expand": (lambda x: x[:, :, :1].expand(-1, -1, 4, -1) * 2.0, X4, ["slice", "expand", "scale"]),
    "const-bias": (lambda x: x + torch.arange(6, dtype=torch.float64), X4, ["const_binary"]),
    "pos-embedding": (lambda x: x + POS, X4, ["const_binary"]),
    "const-scale-sub-rsub": (lambda x: (x * POS[0]) - POS + (POS - x) / (POS.abs() + 1), X4, None),
    "divide": (lambda x: x / (x.abs() + 1.0), X4, ["math", "scale", "divide"]),
    "reciprocal-number": (lambda x: 2.0 / (x * x + 1.0), X4, None),
    "index-tensor": (lambda x: x[:, :, torch.tensor([3, 0, 0])], X4, ["index_select"]),
    "index-mask": (lambda x: x[..., torch.tensor([True, False, True, True, False, True])], X4, ["index_select"]),
    "index-select": (lambda x: x.index_select(-1, torch.tensor([5, 1])), X4, ["index_select"]),
    "math": (lambda x: torch.sqrt(x.abs()) + torch.exp(x) + torch.log(x.abs() + 1) + x.sign() + torch.round(x * 4)
             + x.floor() + x.ceil() + torch.rsqrt(x * x + 1) + torch.reciprocal(x * x + 2), X4, None),
    "powers": (lambda x: x ** 2 + x.pow(3) + (x * x + 1) ** 0.5 + (x * x + 1) ** -0.5 + (x * x + 1) ** -1
               + (x * x + 1) ** -2, X4, None),
    "rms-norm": (lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), X4, None),
    "var-std": (lambda x: x.var(-1, keepdim=True) + x.var((2, 3), unbiased=False, keepdim=True) + x.std(-1, keepdim=True),
                X4, None),
    "manual-layer-norm": (lambda x: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5),
                          X4, None),
    "log-softmax": (lambda x: x.log_softmax(-1) + F.log_softmax(x, dim=2), X4, None),
    "layer-norm-fn": (lambda x: F.layer_norm(x, (4, 6)), X4, ["reshape", "layernorm", "reshape"]),
    "linear-fn-4d": (lambda x: F.linear(x, W), X4, ["linear"]),
    "matmul-constant": (lambda x: x @ W.t() + 1.0, X4, ["linear", "scale"]),
    "matmul-param-t": (lambda x: torch.matmul(x, W.t().contiguous()), X4, ["linear"]),
    "dtype-device": (lambda x: x @ torch.ones(6, 3, dtype=x.dtype, device=x.device), X4, ["linear"]),
    "pad": (lambda x: F.pad(x, (1, 2, -1, 1), mode="constant", value=0.5), X4, None),  # a str argument passes
    "repeat": (lambda x: x.repeat(1, 1, 2, 3), X4, ["reshape", "expand", "reshape"] * 2),
    "nearest-upsampling": (lambda x: F.interpolate(x.flatten(0, 1), scale_factor=2).unflatten(0, (x.shape[0], -1)),
                           XC, ["index_select", "index_select"]),
    "nearest-to-size": (lambda x: F.interpolate(x.flatten(0, 1), size=(9, 12)).unflatten(0, (x.shape[0], -1)),
                        XC, ["index_select", "index_select"]),
    "hardtanh-relu6-leaky": (lambda x: F.hardtanh(x * 2) + F.relu6(x * 4) + F.leaky_relu(x, 0.2), X4, None),
    "adaptive-uneven": (lambda x: F.adaptive_avg_pool2d(x.flatten(0, 1), (4, 5)).unflatten(0, (x.shape[0], -1)),
                        XC, ["adaptive_avgpool2d"]),
}


@pytest.mark.parametrize("case", CASES)
def test_function_lowering(case):
    fn, x, expected = CASES[case]
    graph = check(Fn(lambda x: fn(x)), x)
    assert expected is None or ops(graph) == expected


MODULES = {
    "conv-transpose2d": (nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1), XC),
    "conv-transpose2d-groups-dilation": (nn.ConvTranspose2d(2, 4, 2, stride=(2, 1), groups=2, dilation=2), XC),
    "conv-transpose2d-no-bias": (nn.ConvTranspose2d(2, 2, (3, 1), bias=False), XC),
    "conv-transpose1d": (nn.ConvTranspose1d(4, 3, 3, stride=2), XL),
    "conv-transpose1d-padded": (nn.ConvTranspose1d(4, 2, 4, stride=3, padding=1, output_padding=2, groups=2), XL),
    "adaptive-avgpool2d-uneven": (nn.AdaptiveAvgPool2d((4, 3)), XC),
    "adaptive-avgpool1d-uneven": (nn.AdaptiveAvgPool1d(3), XL),
    "batchnorm1d": (nn.BatchNorm1d(4), XL),
}


@pytest.mark.parametrize("case", MODULES)
def test_per_step_module_lowering(case):
    module, x = MODULES[case]
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(RNG.normal(size=p.shape)))
    check(Fn(per_step, module), x)


@pytest.mark.parametrize("norm", [nn.LayerNorm(6), nn.LayerNorm((4, 6)), nn.LayerNorm(6, elementwise_affine=False),
                                  nn.LayerNorm(6, bias=False)], ids=["last", "two-dims", "plain", "no-bias"])
def test_layer_norm_module(norm):
    """nn.LayerNorm on [T, B, N, D] as users apply it (no merge: it normalizes trailing dims), trained-looking."""
    with torch.no_grad():
        for p in norm.parameters():
            p.copy_(torch.from_numpy(RNG.normal(size=p.shape)))
    graph = check(Fn(lambda x, m: m(x), norm), X4)
    assert "layernorm" in ops(graph)


def test_dropout_in_eval_is_the_identity():
    graph = check(Fn(lambda x, d: F.dropout(d(x), 0.3, training=False) * 2.0, nn.Dropout(0.5)), X4)
    assert ops(graph) == ["scale"]


def test_gelu_in_onnx_agrees_to_the_erf_bound():
    """onnxruntime has no float64 Erf: the emitter's series / continued fraction, measured over [-12, 12]."""
    x = np.linspace(-12, 12, 3 * 2 * 4001).reshape(3, 2, 4001)
    graph = trace(Fn(lambda x: F.gelu(x)), (4001,), input_kind="real")
    got = run(graph, x)
    with torch.no_grad():
        assert np.array_equal(got.outputs(graph)[0], F.gelu(torch.from_numpy(x)).numpy())
    result = check_model_against(export(graph, 3), graph, x, got)
    assert result["equivalent"] and result["max_rel_diff"] < 1e-15, result["max_rel_diff"]  # measured: 1.1e-16


# -- refusals ----------------------------------------------------------------------------------------------
def refused(fn, x=X4, *modules) -> UnsupportedOp:
    with pytest.raises(UnsupportedOp) as e:
        trace(Fn(fn, *modules).double(), x.shape[2:], input_kind="real")
    return e.value


def test_a_rate_read_out_over_time_keeping_the_time_dim_is_refused_with_its_remedy():
    """SpikingJelly's ``out.mean(0)`` compiles (a read-out over time, tests/frontend/test_time_readout.py); kept as
    a [1, B, ...] dim it is no [T, B, ...] sequence and no [B, ...] read-out: refused with the remedy."""
    e = refused(lambda x: x.mean(0, keepdim=True))
    assert "aten.mean" in e.what and "keeping the time dim" in e.what and "without keepdim" in e.remedy


def test_what_has_no_exact_lowering_is_refused_by_name():
    e = refused(lambda x: x ** 1.5)
    assert "aten.pow" in e.what and "power 1.5" in e.what and "exponent of 2" in e.remedy
    e = refused(lambda x: x + torch.ones(3, 1, 1, 6, dtype=torch.float64))  # a constant varying along T
    assert "varies along the leading" in e.what and "per-step dims only" in e.remedy
    e = refused(lambda x: x[..., 0:1].expand(2, -1, -1, -1, 6))  # expand adding a dim in front of T
    assert "aten.expand" in e.what and "keeping the rank" in e.remedy
    e = refused(lambda x: x.mean((2, 3)))
    assert "0-d step" in e.what and "keepdim=True" in e.remedy
    e = refused(lambda x: x.var(1))
    assert "the batch dim B" in e.what
    e = refused(lambda x: torch.atan(x))
    assert "aten.atan" in e.what and "no IR lowering" in e.what


def row_softmax(x):
    return x.reshape(-1, x.shape[-1]).softmax(-1).reshape(x.shape)


torch.fx.wrap("row_softmax")  # one call for fx: captured whole, its [T*B*N, D] view included


def test_a_view_folding_time_and_batch_is_followed_only_into_a_product():
    e = refused(lambda x: row_softmax(x))
    assert "merges the leading [T, B] dims with per-step dims" in e.what and "reshape back" in e.remedy, e.what
    assert "aten._softmax" in e.what and "row_softmax" in e.what, e.what


def test_a_where_on_a_non_mask_is_refused():
    e = refused(lambda x: torch.where(x.bool(), x, 0.0))  # real values cast to bool: not exact in the IR's terms
    assert "casts to torch.bool" in e.what, e.what


def test_spikes_cast_to_a_mask_select():
    """Binary spikes as torch.where's condition (spk.bool()): a compare, then the where; checked against torch."""
    model = nn.Sequential(snc.LIF(beta=0.5, threshold=0.5),
                          Fn(lambda s: torch.where(s.bool(), 0.25, -s - 1.0) * s.bool().float()))
    x = RNG.normal(0.4, 0.6, size=(5, 2, 6))
    graph = check(model, x)
    assert ops(graph)[:2] == ["lif", "compare"] and "where" in ops(graph)


# -- networks end to end ---------------------------------------------------------------------------------------
def spikes(seed, shape, p=0.4):
    return (np.random.default_rng(seed).random(shape) < p).astype(np.float64)


def compiled(model, x, **options):
    c = spikec.compile(model, x, targets=("onnx",), **options)
    assert c.equivalent, c.report["frontend"]
    assert c.targets["onnx"]["spike_exact"], c.targets["onnx"]
    rates = c.report["firing_rates"]
    assert rates and all(0 < r["rate"] < 1 for r in rates.values()), rates  # every layer fires, none always
    return c


class SpikingTransformerBlock(nn.Module):
    """A pre-norm transformer block on spikes [T, B, N, D]: LayerNorm, q/k/v Linear, softmax attention with a
    causal mask (masked_fill), a GELU MLP, residuals, a learned positional embedding, and LIF neurons."""

    def __init__(self, n=4, d=8):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, n, d) * 0.5)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(n, n)).bool())
        self.lif1, self.lif2 = snc.LIF(beta=0.5, threshold=0.5), snc.LIF(beta=0.5, threshold=0.5)

    def forward(self, x):
        x = x + self.pos
        h = self.ln1(x)
        scores = (self.q(h) @ self.k(h).transpose(-2, -1)) * (h.shape[-1] ** -0.5)
        attn = scores.masked_fill(~self.mask, float("-inf")).softmax(-1)
        x = x + self.proj(attn @ self.v(h))
        s = self.lif1(x)
        y = s + self.fc2(F.gelu(self.fc1(self.ln2(s))))
        return self.lif2(y)


def test_spiking_transformer_block():
    torch.manual_seed(0)
    c = compiled(SpikingTransformerBlock(), spikes(11, (5, 3, 4, 8)))
    names = [n.op for n in c.graph.nodes]
    for op in ("layernorm", "softmax", "gelu", "where", "const_binary", "matmul"):
        assert op in names, (op, names)


class Decoder(nn.Module):
    """A convolutional decoder on spikes: ConvTranspose2d upsampling twice with LIF between, then a
    ConvTranspose1d head over the flattened rows, as users write per-step layers (T and B merged)."""

    def __init__(self):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(3, 2, 2, stride=2)
        self.head = nn.ConvTranspose1d(2, 2, 3, stride=2, padding=1)
        self.lif1, self.lif2, self.lif3 = (snc.LIF(beta=0.5, threshold=0.5) for _ in range(3))

    def forward(self, x):
        t, b = x.shape[0], x.shape[1]
        y = self.lif1(self.up1(x.flatten(0, 1)).unflatten(0, (t, b)))            # [T, B, 3, 6, 6]
        y = self.lif2(self.up2(y.flatten(0, 1)).unflatten(0, (t, b)))            # [T, B, 2, 12, 12]
        z = self.head(y.flatten(0, 1).flatten(2)[..., :40]).unflatten(0, (t, b))  # [T, B, 2, 79]
        return self.lif3(z)


def test_transposed_conv_decoder():
    torch.manual_seed(1)
    model = Decoder()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
    c = compiled(model, spikes(12, (4, 2, 4, 3, 3), 0.5))
    assert [n.op for n in c.graph.nodes].count("conv_transpose2d") == 3


class StepDecoder(nn.Module):
    """The snnTorch convention (--stepping step): forward is one step on [B, C, L]; LayerNorm, GELU, a
    ConvTranspose1d and a leaky where between snnTorch Leaky neurons, as written for one step."""

    def __init__(self):
        super().__init__()
        import snntorch
        self.up = nn.ConvTranspose1d(2, 3, 3, stride=2)
        self.norm = nn.LayerNorm(9)
        self.lif1 = snntorch.Leaky(beta=0.8, init_hidden=True)
        self.fc = nn.Linear(27, 4)
        self.lif2 = snntorch.Leaky(beta=0.8, init_hidden=True, output=True)

    def forward(self, x):
        y = F.gelu(self.norm(self.up(x))) * 2.0
        s = self.lif1(torch.where(y > 0, y, 0.5 * y))
        spk, _ = self.lif2(self.fc(s.flatten(1)))
        return spk


def test_step_convention_sees_the_batch_only():
    pytest.importorskip("snntorch", reason="snnTorch is an optional extra")
    torch.manual_seed(3)
    c = compiled(StepDecoder(), spikes(13, (6, 3, 2, 4), 0.5), stepping="step")
    assert {"conv_transpose2d", "layernorm", "gelu", "where"} <= {n.op for n in c.graph.nodes}


class LoopDecoder(nn.Module):
    """The snnTorch tutorial's own time loop (--stepping loop) over the same calls: x[step] through ConvTranspose1d,
    LayerNorm, GELU, a where and a broadcast mean, into a Leaky with explicit state."""

    def __init__(self):
        super().__init__()
        import snntorch
        self.up = nn.ConvTranspose1d(2, 3, 3, stride=2)
        self.norm = nn.LayerNorm(9)
        self.lif = snntorch.Leaky(beta=0.8)

    def forward(self, x):
        mem, rec = self.lif.init_leaky(), []
        for step in range(x.shape[0]):
            y = F.gelu(self.norm(self.up(x[step]))) * 2.0
            spk, mem = self.lif(torch.where(y > 0, y, 0.5 * y) + y.mean(-1, keepdim=True), mem)
            rec.append(spk)
        return torch.stack(rec)


def test_loop_convention_folds_the_captured_calls():
    pytest.importorskip("snntorch", reason="snnTorch is an optional extra")
    torch.manual_seed(0)
    c = compiled(LoopDecoder(), spikes(0, (6, 3, 2, 4), 0.5), stepping="loop")
    assert [n.op for n in c.graph.nodes][1:] == ["reshape", "conv_transpose2d", "reshape", "layernorm", "gelu", "scale",
                                                 "compare", "scale", "where", "mean", "expand", "add", "lif_snntorch"]


def test_a_nan_the_model_masks_away_compiles_exactly():
    """``torch.where(x > 0, x.sqrt(), 0)``: sqrt of the negative entries is NaN in the source and in the IR at the
    same places; the output is finite. Same-place NaNs match (counted as nans_matched), so the compile is
    equivalent, through the default passes and ONNX (review)."""
    import spikec
    x = np.random.default_rng(3).normal(0.0, 1.0, size=(4, 2, 6))
    c = spikec.compile(Fn(lambda v: torch.where(v > 0, v.sqrt(), torch.zeros_like(v))).double(), x,
                       targets=("onnx",))
    assert c.equivalent, c.report["frontend"]
    # the masked NaNs: the IR's sqrt holds them where the source's does, and the checker's rule matches them
    from spikec.core.checker import Comparison
    from spikec.core.interpreter import run
    trace = run(c.graph, x)
    (name,) = [k for k, v in trace.values.items() if np.isnan(v).any()]
    with np.errstate(invalid="ignore"):
        expected = np.sqrt(x)
    cmp = Comparison()
    cmp.add(name, expected, trace.values[name], False)
    assert cmp.equivalent and cmp.nans_matched == int(np.isnan(expected).sum()) > 0

