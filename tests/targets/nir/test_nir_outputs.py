"""A model with two outputs in NIR: snnTorch's tutorial network returns the last Leaky's spikes and membrane records.
nirtorch (under snnTorch, Norse, Sinabs, Rockpool) runs a graph with one Output, so the NIR target runs such a file
one output at a time (``consumers.one_output_parts``: each Output with every node it reads, said in the verdict);
both outputs match the user's own float32 module here, in snnTorch and Norse."""
import nir
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.targets.nir import consumers
from spikec.targets.nir.export import export_graph

snn = pytest.importorskip("snntorch")


class Tutorial(nn.Module):
    """snnTorch tutorial 5's network: two Leaky layers, the spike and membrane records of the last returned."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.lif1 = nn.Linear(10, 8), snn.Leaky(beta=0.95)
        self.fc2, self.lif2 = nn.Linear(8, 4), snn.Leaky(beta=0.95)

    def forward(self, x):
        mem1, mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()
        spk_rec, mem_rec = [], []
        for t in range(x.shape[0]):
            spk1, mem1 = self.lif1(self.fc1(x[t]), mem1)
            spk2, mem2 = self.lif2(self.fc2(spk1), mem2)
            spk_rec.append(spk2)
            mem_rec.append(mem2)
        return torch.stack(spk_rec), torch.stack(mem_rec)


def test_two_outputs_run_one_at_a_time_in_snntorch_and_norse(tmp_path):
    x = np.random.default_rng(0).random((20, 3, 10)) * 3
    c = spikec.compile(Tutorial(), x, targets=("nir",))
    t = c.targets["nir"]
    assert c.equivalent and t["exact"], t
    for name in ("snntorch", "norse"):
        v = t["consumers"][name]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 10 and "2 one-output graphs" in v["per_output"], v
    path = tmp_path / "model.nir"
    g = export_graph(c.graph).graph
    nir.write(path, g)
    parts = consumers.one_output_parts(nir.read(path))
    assert sorted(parts) == ["output", "output_1"]
    with torch.no_grad():
        spk, mem = (r.double().numpy() for r in Tutorial()(torch.as_tensor(x, dtype=torch.float32)))
    assert spk.any() and not spk.all()
    for name in ("snntorch", "norse"):
        for out, want in (("output", spk), ("output_1", mem)):
            sub = tmp_path / f"{out}.nir"
            nir.write(sub, parts[out])
            got, _ = consumers.run_consumer(name, sub, x, 1e-4, want.shape[2:])
            if out == "output":
                np.testing.assert_array_equal(got, want)
            else:   # the membrane, summed in another order than snnTorch's (float32)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_each_part_holds_only_what_its_output_reads():
    x = np.random.default_rng(0).random((4, 3, 10))
    g = export_graph(spikec.compile(Tutorial(), x, targets=()).graph).graph
    parts = consumers.one_output_parts(g)
    for out, sub in parts.items():
        assert [n for n, v in sub.nodes.items() if isinstance(v, nir.Output)] == [out]
        assert all(s in sub.nodes and d in sub.nodes for s, d in sub.edges)
    assert len(parts["output"].nodes) < len(g.nodes)


class SynapticSyn(nn.Module):
    """snnTorch's default Synaptic, its spikes and its synaptic current returned (a biased Linear before it)."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(10, 6)
        self.syn = snn.Synaptic(alpha=0.8, beta=0.9, init_hidden=True, output=True)
        with torch.no_grad():
            self.fc.bias.fill_(0.3)

    def forward(self, x):
        spk, syn, mem = self.syn(self.fc(x))
        return spk, syn


def test_synaptic_read_as_syn_runs_in_snntorch_norse_and_spikingjelly(tmp_path):
    x = np.random.default_rng(0).random((20, 3, 10)) * 3 - 0.5
    c = spikec.compile(SynapticSyn(), x, targets=("nir",), stepping="step")
    t = c.targets["nir"]
    assert c.equivalent and t["exact"] and "LI" not in t["nodes"], t
    assert any("Synaptic's syn" in n for n in t["notes"])
    for name in ("snntorch", "norse", "spikingjelly"):
        v = t["consumers"][name]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 10, (name, v)
    parts = consumers.one_output_parts(export_graph(c.graph).graph)
    net = SynapticSyn()
    with torch.no_grad():
        want = [np.stack([r.numpy() for r in rec]) for rec in zip(*[net(x_t) for x_t in torch.as_tensor(
            x, dtype=torch.float32)])]
    for name in ("snntorch", "norse", "spikingjelly"):
        for out, w in zip(("output", "output_1"), want):
            sub = tmp_path / f"{name}.{out}.nir"
            nir.write(sub, parts[out])
            got, _ = consumers.run_consumer(name, sub, x, 1e-4, w.shape[2:])
            if out == "output":
                np.testing.assert_array_equal(got, w)
            else:   # syn = alpha syn + x in float32, summed in snnTorch's order: the same floats
                np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-6)


def test_the_parts_are_written_outside_the_files_directory(tmp_path):
    """``spikec verify`` checks OUTDIR/model.nir: its per-output parts must not land in the user's OUTDIR."""
    from spikec.core.interpreter import run
    from spikec.targets.nir import check_file
    x = np.random.default_rng(0).random((6, 2, 10)) * 3
    g = spikec.compile(Tutorial(), x, targets=()).graph
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(g).graph)
    report = check_file(path, g, x, run(g, x))
    assert report["consumers"]["snntorch"]["ran"] and sorted(p.name for p in tmp_path.iterdir()) == ["model.nir"]
