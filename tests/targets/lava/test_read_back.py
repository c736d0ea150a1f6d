"""What a successful Lava compile publishes reads back, and what it claims is proven.

* A membrane read from a SpikecLIF population (snnTorch Leaky's ``mem``, spikec.nn.LIF's ``return_membrane``) is
  written in the IR's vocabulary: ``spikec verify OUTDIR`` and ``spikec.load(OUTDIR)`` read it and agree with the
  integer reference the compile ran.
* ``check_written`` reads every artifact back before the OUTDIR is published: one that does not load, or loads as
  something else than what was computed, is a compiler bug naming the file, and no OUTDIR appears.
* The products rewrite's proof is part of the Lava verdict: a wrong rewrite, run bit-exact by Lava against its own
  integer reference, still makes the target fail.
"""
import numpy as np
import pytest
import torch
from torch import nn

from spikec.ir.errors import IRError
from spikec.targets.lava import lava_available

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


class LeakyMem(nn.Module):
    """snnTorch Leaky (subtract reset, a SpikecLIF population) with its membrane returned."""
    input_shape, steps = (6,), 5

    def __init__(self):
        super().__init__()
        import snntorch as snn
        torch.manual_seed(0)
        self.fc, self.lif = nn.Linear(6, 4), snn.Leaky(beta=0.9)

    def forward(self, x):
        mem, spk_rec, mem_rec = self.lif.init_leaky(), [], []
        for t in range(x.shape[0]):
            spk, mem = self.lif(self.fc(x[t]), mem)
            spk_rec.append(spk)
            mem_rec.append(mem)
        return torch.stack(spk_rec), torch.stack(mem_rec)


class LIFMembrane(nn.Module):
    """spikec.nn.LIF with its default (subtract) reset, spikes and pre-reset membrane returned."""
    input_shape, steps = (6,), 5

    def __init__(self):
        super().__init__()
        import spikec.nn as snc
        torch.manual_seed(0)
        self.fc, self.lif = nn.Linear(6, 4), snc.LIF(beta=0.9, return_membrane=True)

    def forward(self, x):
        return self.lif(self.fc(x))


def _compiled(module, target):
    import spikec
    return spikec.compile(module(), targets=target).compiled


@needs_lava
@pytest.mark.parametrize("module", [LeakyMem, LIFMembrane])
def test_a_membrane_read_compiles_and_reads_back_through_verify_and_load(tmp_path, module):
    import spikec
    from spikec.app.driver import write_outdir
    from spikec.app.verify import verify_outdir
    from spikec.core.interpreter import run
    from spikec.targets.lava import choose_deployment, load_deployed
    from spikec.targets.lava.ops import output_of
    c = _compiled(module, "lava")
    assert c.report["equivalent"] is True and c.report["target"]["state_reads_compared"] + \
        c.report["target"]["values_compared"] > 0
    out = write_outdir(tmp_path / "OUT", c)
    q = load_deployed(out)[0]
    reads = [n for n in q.nodes if n.name in q.outputs and output_of(n) != "spikes"]
    assert reads and all(n.attrs["output"] in ("spikes", "membrane") for n in q.nodes if "output" in n.attrs)
    results = verify_outdir(out, model=module())
    assert all(r["equivalent"] for r in results.values()), results
    x = np.load(out / "io.npz")["input"]
    loaded = spikec.load(out)(x)
    fresh = choose_deployment(c.graph, x, {})[0].graph   # the integer reference as the compile derived it
    want = run(fresh, {"input": x.astype(np.int64)}, integer=True, record="outputs").values
    assert set(loaded) == set(q.outputs) and all(np.array_equal(loaded[o], want[o]) for o in q.outputs)
    assert any(np.abs(loaded[n.name]).max() > 0 for n in reads)


def _with_file(compiled, name, writer):
    from dataclasses import replace
    return replace(compiled, files={**compiled.files, name: writer})


def test_an_artifact_that_does_not_load_is_a_compiler_bug_and_no_outdir(tmp_path):
    from spikec.app.driver import write_outdir
    c = _with_file(_compiled(LIFMembrane, "none"), "model.onnx", lambda p: p.write_bytes(b"not an onnx model"))
    with pytest.raises(IRError) as e:
        write_outdir(tmp_path / "OUT", c)
    assert "model.onnx does not load" in e.value.what and "compiler bug" in e.value.remedy
    assert not (tmp_path / "OUT").exists() and not list(tmp_path.iterdir())


def test_a_lava_directory_that_reads_back_otherwise_is_a_compiler_bug(tmp_path):
    """The integer reference as the previous release wrote a state read (``output = 'v'``, which the IR verifier
    refuses on load), and params.npz holding another weight than computed: both named, neither published."""
    import json
    from spikec.app.driver import write_outdir
    from spikec.targets.lava import _write_lava_dir, deploy, read_lava
    from spikec.targets.lava.written import LavaDir
    c = _compiled(LeakyMem, "none")
    x = c.io["input"]
    q, net, arrays = deploy(c.graph, x, {"lava_reset": "subtract"})   # SpikecLIF: its v read through v_out
    good = LavaDir(lambda p: _write_lava_dir(p, q.graph, net, arrays), q.graph, net, arrays, read_lava)
    write_outdir(tmp_path / "GOOD", _with_file(c, "lava", good))   # the writer as the target uses it reads back

    def old_attrs(p):
        good(p)
        doc = json.loads((p / "quantized" / "graph.json").read_text())
        for n in doc["nodes"]:
            if n.get("attrs", {}).get("state") == "v":
                n["attrs"] = {k: v for k, v in n["attrs"].items() if k != "state"} | {"output": "v"}
        (p / "quantized" / "graph.json").write_text(json.dumps(doc))

    with pytest.raises(IRError) as e:
        write_outdir(tmp_path / "OLD", _with_file(c, "lava", LavaDir(old_attrs, q.graph, net, arrays, read_lava)))
    assert "lava does not load" in e.value.what and "'output' = 'v'" in e.value.what
    other = {k: v + 1 if k.endswith("/weights") else v for k, v in arrays.items()}
    wrong = LavaDir(lambda p: _write_lava_dir(p, q.graph, net, other), q.graph, net, arrays, read_lava)
    with pytest.raises(IRError) as e:
        write_outdir(tmp_path / "WRONG", _with_file(c, "lava", wrong))
    assert "lava/params.npz: fc/weights" in e.value.what
    assert not (tmp_path / "OLD").exists() and not (tmp_path / "WRONG").exists()


@needs_lava
def test_a_wrong_products_rewrite_fails_the_lava_verdict(monkeypatch):
    """The AND population reads operand a twice (a AND a = a, not a * b): Lava runs the rewritten graph bit-exact
    against its own integer reference, and only the rewrite's proof sees it."""
    from spikec.core.interpreter import run
    from spikec.ir.graph import Graph
    from spikec.targets.lava import compile_lava, products
    from test_sdna_sdt_lava import _product_graph
    honest = products.prepare

    def wrong(graph):
        prep = honest(graph)
        nodes = {n.name: n for n in prep.graph.nodes}
        planted = [n.with_(inputs=nodes[n.name[:-1] + "a"].inputs) if n.name.endswith(".and.b") else n
                   for n in prep.graph.nodes]
        return products.Prepared(Graph(tuple(planted), prep.graph.outputs, prep.graph.meta), prep.products,
                                 prep.rewrites)

    monkeypatch.setattr(products, "prepare", wrong)
    g, x = _product_graph(batch=3, seed=2)
    result = compile_lava(g, x, run(g, x), {})
    t = result.report
    proof = t["products"]["rewrite_check"]
    assert proof["equivalent"] is False and proof["spike_mismatches"] > 0
    assert t["mismatch_counts"] == {}, "Lava ran the rewritten graph as its integer reference says"
    assert t["bit_exact"] is False and result.ok is False
    assert "REWRITE NOT PROVEN" in t["summary"]
