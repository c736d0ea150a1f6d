"""Per-step structure on the Lava target (``placement.py``): a DenseNet-style ``torch.cat`` of spikes feeding convs
and a Linear, and a Spikformer-style token ``.mean`` next to a ``select`` of a token, concatenated into a Linear
head, compiled from plain PyTorch through ``spikec.compile``. Each synapse reading a placement becomes one synapse
per source; Lava's fixed-point run must equal the integer reference bit for bit, and the rewritten float graph must
equal the given one (``rewrite_check``). A conv reading a spatial slice has no such split: refused, naming it."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
import spikec.nn as snc
from spikec.ir.errors import UnsupportedOp
from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


def scaled(model, gain):
    torch.manual_seed(0)
    m = model()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(gain)
    return m


def spikes(seed, shape, p=0.4):
    return (np.random.default_rng(seed).random(shape) < p).astype(np.float64)


class DenseBlock(nn.Module):
    """Each layer's spikes concatenated to its input along the channels, then a Linear on the flattened block."""

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


class TokenHead(nn.Module):
    """Spikes as 4 tokens of 4: the mean over the tokens and token 1, side by side, into a Linear head."""

    def __init__(self):
        super().__init__()
        self.fc, self.lif = nn.Linear(12, 16), snc.LIF(beta=0.5, threshold=0.5)
        self.head, self.out = nn.Linear(8, 3), snc.LIF(beta=0.5, threshold=0.5)

    def forward(self, x):
        s = self.lif(self.fc(x))
        t = s.reshape(s.shape[0], s.shape[1], 4, 4)
        return self.out(self.head(torch.cat([t.mean(2), t[:, :, 1]], dim=2)))


class SpatialSlice(nn.Module):
    def __init__(self):
        super().__init__()
        self.lif = snc.LIF(beta=0.5, threshold=0.5)
        self.conv = snc.TimeDistributed(nn.Conv2d(2, 2, 3, padding=1))
        self.out = snc.LIF(beta=0.5, threshold=0.5)

    def forward(self, x):
        return self.out(self.conv(self.lif(x)[:, :, :, 1:3]))


def lava_of(c):
    r = c.targets["lava"]
    assert c.equivalent and r["bit_exact"] is True, r.get("summary", r)
    assert r["products"]["rewrite_check"]["equivalent"]
    rates = c.report["firing_rates"]
    assert all(0 < v["rate"] < 1 for v in rates.values()), rates   # no silent layer: the proof covers spikes
    return r


def test_concat_dense_block_splits_each_synapse_per_source():
    c = spikec.compile(scaled(DenseBlock, 1.5), spikes(3, (5, 1, 2, 4, 4)), targets=("lava",))
    assert [n.op for n in c.graph.nodes].count("concat") == 2
    r = lava_of(c)
    procs = {p["name"]: p["type"] for p in r["processes"]}
    # the second conv reads the input and lifs.0 (two Convs), the head all three sources (three Denses)
    assert sorted(k for k in procs if k.startswith("convs.1.0.from.") and procs[k] == "Conv") == \
        ["convs.1.0.from.input", "convs.1.0.from.lifs.0"]
    assert sorted(k for k in procs if k.startswith("head.from.") and procs[k] in ("Dense", "DelayDense")) == \
        ["head.from.input", "head.from.lifs.0", "head.from.lifs.1"]   # earlier streams delayed by DelayDense
    assert r["lowering"]["out"]["streams"] == 3
    assert r["products"]["synapses_split"] == ["convs.1.0", "head"]
    assert "2 synapse(s) split per source" in r["summary"]


def test_token_mean_and_select_into_a_linear_head():
    c = spikec.compile(scaled(TokenHead, 2.0), spikes(1, (5, 1, 12)), targets=("lava",))
    ops = [n.op for n in c.graph.nodes]
    assert {"mean", "slice", "concat"} <= set(ops), ops
    r = lava_of(c)
    # both halves of the concat read the same population: one Dense, the mean's 1/4 folded into its weights
    assert [p["name"] for p in r["processes"] if p["type"] == "Dense" and p["name"].startswith("head")] == ["head"]
    assert r["lowering"]["out"]["streams"] == 1
    assert r["products"]["synapses_split"] == ["head"]


def test_conv_reading_a_spatial_slice_is_refused_by_name():
    r = spikec.compile(SpatialSlice(), spikes(2, (3, 1, 2, 4, 4)), targets=("lava",)).targets["lava"]
    assert r["refused"] and r["error"] == UnsupportedOp.__name__, r
    assert "cannot map node 'getitem' (slice): a slice is mapped only as wiring" in r["reason"]
    assert "a conv2d across spatial positions" in r["reason"]


class NorseRecurrent(nn.Module):
    """Norse's LIFRecurrent (input and recurrent weights inside the op) into a Linear read-out."""

    def __init__(self, n_in=6, n=12):
        super().__init__()
        import norse.torch as nt
        torch.manual_seed(7)
        p = nt.LIFParameters(tau_syn_inv=200.0, tau_mem_inv=100.0, v_th=0.3, v_reset=-0.1, v_leak=torch.tensor(0.125))
        self.rec = nt.LIFRecurrent(n_in, n, p, dt=2e-3)
        self.out = nn.Linear(n, 3)

    def forward(self, x):
        z, _ = self.rec(x)
        return self.out(z)


def test_norse_lif_recurrent_is_a_dense_a_population_and_its_loop():
    pytest.importorskip("norse.torch", reason="Norse is an optional extra")
    import spikec.frontend.norse  # noqa: F401  (registers the converters)
    x = spikes(8, (12, 1, 6), 0.5) * 3
    c = spikec.compile(NorseRecurrent(), x, targets=("lava",))
    assert "lif_recurrent_norse" in {n.op for n in c.graph.nodes}
    r = c.targets["lava"]
    assert c.equivalent and r["bit_exact"] is True, r.get("summary", r)
    assert r["products"]["rewrite_check"]["outputs_equal"]   # identity input weights: the same float values
    procs = {p["name"]: p["type"] for p in r["processes"]}
    assert procs["rec.input"] == "Dense" and procs["rec.recurrent"] == "Dense" and procs["rec"] == "SpikecLIF"
    assert 0 < c.report["firing_rates"]["rec"]["rate"] < 1
    loop = r["quantization"]["layers"]["rec"]["recurrence"]
    assert loop["synapse"] == "rec.recurrent", loop
    assert r["products"]["synapses_split"] == ["rec"]


class SewIand(nn.Module):
    """Two SEW blocks as SpikingJelly writes them, 'ADD' then 'IAND': the second multiplies by 1 - (a count)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.lif1 = snc.TimeDistributed(nn.Conv2d(2, 2, 3, padding=1)), snc.LIF(beta=0.5, threshold=0.5)
        self.conv2, self.lif2 = snc.TimeDistributed(nn.Conv2d(2, 2, 3, padding=1)), snc.LIF(beta=0.5, threshold=0.5)
        self.fc, self.out = snc.TimeDistributed(nn.Flatten(), nn.Linear(2 * 6 * 6, 3)), snc.LIF(beta=0.5)

    def forward(self, x):
        added = self.lif1(self.conv1(x)) + x                     # SEW 'ADD': a count 0..2
        return self.out(self.fc(self.lif2(self.conv2(added)) * (1.0 - added)))   # SEW 'IAND' of the count


def test_a_sum_of_spikes_read_by_a_host_op_is_refused_naming_the_sum_and_its_reader():
    c = spikec.compile(scaled(SewIand, 2.0), spikes(3, (5, 2, 2, 6, 6)), targets=("lava",))
    t = c.targets["lava"]
    assert t["refused"] and "reads this sum of spike tensors" in t["reason"] and "connect_f" in t["reason"], t
