"""The NIR paper's files (tests/fixtures/nir_paper, PROVENANCE.md) compiled unchanged to every target.

``lif_norse.nir`` at the paper's dt = 1e-4 with the paper's input spikes at steps 460, 510, 710, 760 on Lava (the
spikes Lava's fixed-point simulation sends, and the integer reference it is bit-exact with), on NIR (the file
written, run by spikec's interpreter, snnTorch and Norse) and on ONNX (the file run in onnxruntime). Sinabs' CNN
(``--dt 1``: its SumPool2d folds into the next synapse) and Rockpool's LIF deploy to Lava bit-exactly.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from spikec.app.cli import main
from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava.pooling import is_sum_pool, operator_of
from spikec.frontend.nir_file import load_nir, nir_model

PAPER = Path(__file__).resolve().parents[1] / "fixtures" / "nir_paper"
DT = 1e-4
# paper/01_lif/lif_norse.ipynb: d0, each entry followed by nine zeros (1000 steps of dt = 1e-4)
D0 = [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 0,
      1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1,
      1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
PAPER_SPIKES = [460, 510, 710, 760]  # paper/01_lif/lif_norse.csv and lif_exact.csv
ROCKPOOL_SPIKES = [460, 520, 720, 780]  # Rockpool's re-export as written (input gain 0.961, not 1)


def paper_input():
    x = np.zeros((1000, 1, 1))
    x[::10, 0, 0] = D0
    return x


def steps(y) -> list:
    return np.flatnonzero(np.asarray(y).reshape(len(y), -1)[:, 0] > 0).tolist()


def compile_paper(tmp_path, name, target, *args, x=None):
    out = tmp_path / f"{name}_{target}"
    opts = ["compile", str(PAPER / f"{name}.nir"), "-o", str(out), "--target", target, "--no-probes", *args]
    if x is not None:
        np.savez(tmp_path / "in.npz", input=x)
        opts += ["--inputs", str(tmp_path / "in.npz")]
    result = CliRunner().invoke(main, opts)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["equivalent"], report["target"]
    return out, report["target"]


def lava_run(out, x):
    """What Lava's fixed-point simulation sends for ``x`` (spikec.targets.lava.network, README), and the integer
    reference's output."""
    import spikec.targets.lava as spikec_lava
    net = spikec_lava.network(out, batch=x.shape[1])
    from lava.magma.core.run_configs import Loihi2SimCfg
    y = net.run(x, Loihi2SimCfg(select_tag="fixed_pt"))
    return y[net.output_names[0]], spikec_lava.load(out)(x)


@pytest.mark.parametrize("name, spikes", [("lif_norse", PAPER_SPIKES), ("lif_rockpool", ROCKPOOL_SPIKES)])
def test_paper_lif_on_lava(name, spikes, tmp_path):
    x = paper_input()
    out, target = compile_paper(tmp_path, name, "lava", "--dt", "1e-4", "--nir-scheme", "norse", x=x)
    assert target["bit_exact"] and target["steps_compared"] == 1000
    lava, reference = lava_run(out, x)
    assert steps(lava) == steps(reference) == spikes


@pytest.mark.parametrize("scheme", ["norse", "snntorch"])
def test_lif_norse_on_nir(scheme, tmp_path):
    x = paper_input()
    out, target = compile_paper(tmp_path, "lif_norse", "nir", "--dt", "1e-4", "--nir-scheme", scheme, x=x)
    assert target["exact"] and (target["dt"], target["scheme"]) == (DT, scheme)
    written = nir_model(out / "model.nir", DT, scheme)(torch.as_tensor(x)).numpy()
    assert steps(written) == PAPER_SPIKES
    for consumer in ("snntorch", "norse"):   # the file run by the importers, spike for spike with spikec
        c = target["consumers"][consumer]
        assert c["ran"] and c["spike_exact"] and c["spike_count"] == 4, (consumer, c)


def test_lif_norse_on_onnx(tmp_path):
    import onnxruntime as ort
    x = paper_input()
    out, target = compile_paper(tmp_path, "lif_norse", "onnx", "--dt", "1e-4", "--nir-scheme", "norse", x=x)
    assert target["spike_exact"]
    session = ort.InferenceSession(str(out / "model.onnx"))
    y = session.run(None, {session.get_inputs()[0].name: x})[0]
    assert steps(y) == PAPER_SPIKES


def test_cnn_sinabs_on_lava(tmp_path):
    """Sinabs' N-MNIST CNN at dt = 1 (its IF neurons step once per time bin): both SumPool2d fold into the
    synapse after them (a conv2d, a flattened linear) and Lava runs bit-exact."""
    out, target = compile_paper(tmp_path, "cnn_sinabs", "lava", "--dt", "1", "--steps", "4", "--batch", "1")
    assert target["bit_exact"] and target["spikes_compared"] > 0
    assert {p["process"] for p in target["lowering"].values()} == {"LIF"}


# -- the sum pool fold, exact in real arithmetic -----------------------------------------------------------------

def _node(name, op, inputs, shape, kind, attrs=None, params=None):
    return Node(name=name, op=op, inputs=tuple(inputs), attrs=attrs or {}, params=params or {},
                type=TensorType(shape=shape, kind=kind))


def _conv(x, w, stride=(1, 1), padding=(0, 0), groups=1):
    return torch.nn.functional.conv2d(torch.as_tensor(x), torch.as_tensor(w), stride=stride, padding=padding,
                                      groups=groups).numpy()


@pytest.mark.parametrize("then", ["conv2d", "linear"])
def test_a_sum_pool_folds_into_the_next_synapse(then):
    rng = np.random.default_rng(0)
    c, h = 3, 8
    ones = np.ones((c, 1, 2, 2))
    pool = _node("pool", "conv2d", ["s"], (c, 4, 4), "real", dict(stride=(2, 2), padding=(0, 0), dilation=(1, 1),
                                                                   groups=c), {"weight": ones})
    s = _node("s", "input", [], (c, h, h), "binary")
    x = (rng.random((2, c, h, h)) < 0.4).astype(float)
    pooled = _conv(x, ones, stride=(2, 2), groups=c)
    if then == "conv2d":
        w = rng.normal(size=(5, c, 3, 3))
        syn = _node("syn", "conv2d", ["pool"], (5, 4, 4), "real",
                    dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1), {"weight": w})
        nodes, expect = [s, pool, syn], _conv(pooled, w, padding=(1, 1))
    else:
        w = rng.normal(size=(4, c * 16))
        flat = _node("flat", "flatten", ["pool"], (c * 16,), "real", {"start": 0, "end": 2})
        syn = _node("syn", "linear", ["flat"], (4,), "real", {}, {"weight": w})
        nodes, expect = [s, pool, flat, syn], pooled.reshape(2, -1) @ w.T
    g = Graph(tuple(nodes), ("syn",), {})
    assert is_sum_pool(pool) and not is_sum_pool(syn)
    op = operator_of(g, syn)
    assert op.src == "s" and [n.name for n in op.nodes][0] == "pool"
    if op.kind == "conv":
        a = op.attrs
        got = _conv(x, op.weight, stride=a["stride"], padding=a["padding"])
    else:
        got = x.reshape(2, -1) @ op.weight.T
    np.testing.assert_allclose(got, expect, rtol=0, atol=1e-12)


# -- the Braille recurrent CubaLIF networks ---------------------------------------------------------------------

BRAILLE = ("braille_noDelay_bias_zero", "braille_noDelay_noBias_subtract")


def braille_input(steps=60, batch=2, seed=0):
    """Random spikes on the 12 Braille sensor channels (the paper's data is not in the repository)."""
    return (np.random.default_rng(seed).random((steps, batch, 12)) < 0.3).astype(np.float64)


@pytest.mark.parametrize("name", BRAILLE)
def test_braille_reads_as_rsynaptic_exactly(name):
    """Both CubaLIFs become snnTorch's Synaptic (the recurrent one RSynaptic, summing its recurrence with the
    input as NIR does), and the IR equals spikec's NIR interpreter on the file bit for bit; the network fires."""
    from spikec.core.interpreter import run
    g = load_nir(PAPER / f"{name}.nir", DT)
    ops = {n.name: (n.op, n.attrs.get("recurrent"), n.attrs.get("rec_add")) for n in g.nodes}
    assert ops["lif1.lif"] == ("synaptic_snntorch", "linear", "input") and ops["lif2"][:2] == ("synaptic_snntorch",
                                                                                                   "none")
    x = braille_input()
    ref = nir_model(PAPER / f"{name}.nir", DT)(torch.as_tensor(x)).numpy()
    got = run(g, {"input": x}).values[g.outputs[0]]
    assert np.array_equal(np.asarray(got), ref) and ref.sum() > 0


@pytest.mark.parametrize("name", BRAILLE)
def test_braille_on_lava_bit_exact(name, tmp_path):
    x = braille_input()
    out, target = compile_paper(tmp_path, name, "lava", "--dt", "1e-4", x=x)
    assert target["bit_exact"] and target["spikes_compared"] > 0
    procs = {p["name"]: p for p in target["processes"]}
    assert procs["lif1.lif.recurrent"]["type"] == "Dense"   # the recurrence: a Dense from s_out back to a_in
    if name.endswith("noBias_subtract"):   # no bias anywhere: every process is Lava's own
        assert all(p["chip_ready"] for p in procs.values()) and procs["lif1.lif"]["type"] == "LIF"
    else:   # the recurrence's bias is a current bias: Lava's LIF fed by a bias Dense from the always-firing source
        assert all(p["chip_ready"] for p in procs.values()) and procs["lif1.lif"]["type"] == "LIF"
        assert any(p["type"] == "BiasLIF" for p in procs.values())
    lava, reference = lava_run(out, x)
    assert np.array_equal(lava, reference) and lava.sum() > 0


@pytest.mark.parametrize("name", BRAILLE)
def test_braille_re_exports_to_nir_exactly(name, tmp_path):
    """The re-export is a CubaLIF <-> Affine/Linear cycle that spikec's NIR interpreter runs exactly; Norse runs
    it spike for spike when the recurrence has no bias (with one, nirtorch reads the cycle as 0 at the first
    step: named); snnTorch 1.0.0's importer raises on it, as it does on the paper's own file (a consumer bug)."""
    x = braille_input()
    out, target = compile_paper(tmp_path, name, "nir", "--dt", "1e-4", x=x)
    assert target["exact"]
    written = nir_model(out / "model.nir", DT)(torch.as_tensor(x)).numpy()
    source = nir_model(PAPER / f"{name}.nir", DT)(torch.as_tensor(x)).numpy()
    assert np.array_equal(written, source)
    norse = target["consumers"]["norse"]
    if name.endswith("noBias_subtract"):
        assert norse["ran"] and norse["spike_exact"], norse
    else:
        assert not norse["ran"] and "first step" in norse["reason"], norse
        assert norse["reason"].count("a recurrence with a bias") == 1   # one loop, one reason (it has two edges)
    snn = target["consumers"]["snntorch"]
    assert not snn["ran"] and "AttributeError" in str(snn), snn
    with pytest.raises(AttributeError):   # the paper's own file fails the same way in snnTorch 1.0.0 + nirtorch 2.6
        import nir
        from snntorch.import_nir import import_from_nir
        import_from_nir(nir.read(PAPER / f"{name}.nir"))


def test_a_recurrent_cubalif_that_is_not_rsynaptic_is_refused_naming_why(tmp_path):
    import nir
    from spikec.ir.errors import UnsupportedOp
    g = nir.read(PAPER / "braille_noDelay_noBias_subtract.nir")
    g.nodes["lif1.lif"].v_reset = np.full(40, 0.5)
    with pytest.raises(UnsupportedOp) as e:
        load_nir(g, DT)
    text = f"{e.value.what} {e.value.where} {e.value.remedy}"
    assert "'lif1.lif' (CubaLIF)" in text and "lif1.w_rec" in text and "v_reset != 0" in text
    assert "reset_delay=False" in e.value.remedy
    with pytest.raises(UnsupportedOp) as e:
        load_nir(PAPER / "braille_noDelay_noBias_subtract.nir", DT, scheme="norse")
    assert "norse scheme" in e.value.what


def test_the_remedy_lowers_on_lava_and_onnx():
    """What the refusal proposes, snnTorch's RSynaptic with a zero reset and reset_delay=False, is a coverage
    row that Lava and ONNX lower."""
    from spikec.targets import coverage
    row = "synaptic_snntorch (RSynaptic linear, zero, reset_delay=False)"
    assert row in coverage.rows()
    assert all(coverage.cell(row, t).status == "lowers" for t in ("lava", "onnx"))
