"""Networks as users write them, compiled end to end (``spikec.compile``, ONNX target) through the ATen capture:
nn.Conv1d with snnTorch Leaky on [T, B, C, L] audio (multi-step and per-step), torch.cat in a dense block, and a
Spikformer SSA block (q, k, v as Linear + BN + LIF, ``q @ k^T @ v * 0.125``, ``.contiguous()``, a ``.mean()``
head). Each compile is proven equivalent: the trace against torch, the passes, and onnxruntime spike for spike."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
import spikec.nn as snc

snntorch = pytest.importorskip("snntorch", reason="snnTorch is an optional extra")
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def spikes(seed, shape, p=0.4):
    return (np.random.default_rng(seed).random(shape) < p).astype(np.float64)


def scaled(model, gain=2.0, seed=0):
    """Weights scaled up so the neurons fire often (a silent network proves little)."""
    torch.manual_seed(seed)
    model = model()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(gain)
    return model


def compiled(model, x, **options):
    c = spikec.compile(model, x, targets=("onnx",), **options)
    assert c.equivalent, c.report["frontend"]
    assert c.targets["onnx"]["spike_exact"]
    return c


def busy(c):
    """Every neuron layer fired at some steps and not at others (a proof over silent layers proves little)."""
    rates = c.report["firing_rates"]
    assert rates and all(0 < r["rate"] < 1 for r in rates.values()), rates


def ops(c):
    return [n.op for n in c.graph.nodes]


class AudioMultiStep(nn.Module):
    """[T, B, C, L]: Conv1d per step (T and B merged), snnTorch Leaky over the sequence, then a Linear read-out."""

    def __init__(self):
        super().__init__()
        from spikec.frontend.snntorch import SnnTorchMultiStep
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.lif = SnnTorchMultiStep(snntorch.Leaky(beta=0.9))
        self.fc = nn.Linear(4 * 8, 3)
        self.out = SnnTorchMultiStep(snntorch.Leaky(beta=0.8))

    def forward(self, x):
        t, b = x.shape[0], x.shape[1]
        y = self.lif(self.conv(x.flatten(0, 1)).unflatten(0, (t, b)))
        return self.out(self.fc(y.flatten(2)))


class AudioStep(nn.Module):
    """The same network as snnTorch users step it: forward is one step on [B, C, L] (--stepping step)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.lif = snntorch.Leaky(beta=0.9, init_hidden=True)
        self.fc = nn.Linear(4 * 8, 3)
        self.out = snntorch.Leaky(beta=0.8, init_hidden=True, output=True)

    def forward(self, x):
        spk, _ = self.out(self.fc(self.lif(self.conv(x)).flatten(1)))
        return spk


def test_conv1d_with_snntorch_leaky_multistep():
    c = compiled(scaled(AudioMultiStep), spikes(1, (6, 3, 2, 8)))
    assert ops(c)[1:4] == ["reshape", "conv2d", "reshape"]
    busy(c)


def test_conv1d_with_snntorch_leaky_per_step():
    c = compiled(scaled(AudioStep), spikes(2, (6, 3, 2, 8)), stepping="step")
    assert ops(c)[1:4] == ["reshape", "conv2d", "reshape"]
    busy(c)


class DenseBlock(nn.Module):
    """DenseNet-style: each layer's spikes are concatenated to its input along the channels."""

    def __init__(self, c=2, growth=2, layers=2):
        super().__init__()
        self.convs = nn.ModuleList(snc.TimeDistributed(nn.Conv2d(c + k * growth, growth, 3, padding=1))
                                   for k in range(layers))
        self.lifs = nn.ModuleList(snc.LIF(beta=0.5, threshold=0.5) for _ in range(layers))
        self.head = nn.Linear((c + layers * growth) * 4 * 4, 3)
        self.out = snc.LIF(beta=0.5, threshold=0.5)

    def forward(self, x):
        for conv, lif in zip(self.convs, self.lifs):
            x = torch.cat([x, lif(conv(x))], dim=2)
        return self.out(self.head(x.flatten(2)))


def test_torch_cat_in_a_dense_block():
    c = compiled(scaled(DenseBlock, 1.5), spikes(3, (5, 2, 2, 4, 4)))
    assert ops(c).count("concat") == 2
    busy(c)


class SSA(nn.Module):
    """Spikformer's spiking self-attention: q, k, v as Linear + BN + LIF on [T, B, N, D], two heads,
    ``q @ k^T @ v * 0.125``, an attention LIF, a projection, and a mean over the tokens for the head."""

    def __init__(self, n=4, d=8, heads=2):
        super().__init__()
        self.heads = heads
        for name in ("q", "k", "v"):
            setattr(self, f"{name}_linear", nn.Linear(d, d))
            setattr(self, f"{name}_bn", nn.BatchNorm1d(d))
            setattr(self, f"{name}_lif", snc.LIF(beta=0.5, threshold=0.5))
        self.attn_lif = snc.LIF(beta=0.5, threshold=0.25)
        self.proj = nn.Linear(d, d)
        self.head = nn.Linear(d, 3)
        self.out = snc.LIF(beta=0.5, threshold=0.5)

    def branch(self, x, name):
        t, b, n, d = x.shape
        y = getattr(self, f"{name}_linear")(x.flatten(0, 1))                       # [T*B, N, D]
        y = getattr(self, f"{name}_bn")(y.transpose(-1, -2)).transpose(-1, -2)     # BN over D
        y = getattr(self, f"{name}_lif")(y.reshape(t, b, n, d).contiguous())
        return y.reshape(t, b, n, self.heads, d // self.heads).permute(0, 1, 3, 2, 4).contiguous()

    def forward(self, x):
        t, b, n, d = x.shape
        q, k, v = (self.branch(x, name) for name in ("q", "k", "v"))
        y = q @ k.transpose(-2, -1) @ v * 0.125                                    # [T, B, H, N, D/H]
        y = self.attn_lif(y.transpose(2, 3).reshape(t, b, n, d).contiguous())
        y = self.proj(y)
        return self.out(self.head(y.mean(2)))


def _ssa():
    model = SSA()
    for name in ("q", "k", "v"):  # trained-looking statistics (eval mode reads them)
        bn = getattr(model, f"{name}_bn")
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)
    return model


def test_spikformer_ssa_block():
    c = compiled(scaled(_ssa, 1.5), spikes(4, (4, 2, 4, 8)))
    assert "mean" in ops(c) and ops(c).count("matmul") == 2
    busy(c)


class AudioLoop(nn.Module):
    """The snnTorch tutorial's loop (--stepping loop): Conv1d, a slice and torch.cat on each step x[step]."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.lif = snntorch.Leaky(beta=0.9)

    def forward(self, x):
        mem, rec = self.lif.init_leaky(), []
        for step in range(x.shape[0]):
            cur = self.conv(x[step])
            spk, mem = self.lif(torch.cat([cur, cur[:, :, :4] * 0.5], dim=2), mem)
            rec.append(spk)
        return torch.stack(rec)


def test_conv1d_cat_and_slice_in_a_loop_model():
    c = compiled(scaled(AudioLoop, 3.0), spikes(5, (6, 2, 2, 8), 0.5), stepping="loop")
    assert ops(c)[1:] == ["reshape", "conv2d", "reshape", "slice", "scale", "concat", "lif_snntorch"]
    busy(c)


def test_conv1d_with_snntorch_leaky_on_lava():
    """Lava takes the captured Conv1d as its 1 x L conv2d between the two reshapes: bit-exact in Lava."""
    pytest.importorskip("lava", reason="lava-nc is an optional extra")
    c = spikec.compile(scaled(AudioMultiStep), spikes(1, (6, 3, 2, 8)), targets=("lava",))
    assert c.equivalent and c.targets["lava"]["bit_exact"] is True, c.targets["lava"]
