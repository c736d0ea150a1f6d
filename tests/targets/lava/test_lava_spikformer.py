"""A Spikformer SSA block as its users write it (``spikformer_models.py``: q, k, v each token-wise Linear +
BatchNorm1d + SpikingJelly LIF on ``(T, B, N, D)``, ``q @ k.transpose(-2, -1) * 0.125``, ``attn @ v``,
``.contiguous()``, a projection and a ``.mean(2)`` head) runs bit-exact in Lava's fixed-point simulation: the
token-wise Linears are block-diagonal Dense processes over the flattened tokens (``tokens.py``, BatchNorm folded in),
``q @ k^T`` (binary x binary) runs on chip as AND neurons that are Lava's standard LIF (du = dv = 4095, vth = 1),
``attn @ v`` (real x binary) on a host partition; the report says, per process that is not chip-ready, why and what
would make it chip-ready (``chip.py``), one summary line each."""
from pathlib import Path

import numpy as np
import pytest
import torch

from spikec.targets.lava import chip, lava_available

pytest.importorskip("spikingjelly")
REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")

HERE = Path(__file__).resolve().parent
MODELS = HERE / "spikformer_models.py"


def _models():
    import importlib.util
    spec = importlib.util.spec_from_file_location("spikformer_models", MODELS)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _compile(factory, tmp_path, target="lava"):
    from spikec.app.driver import CompileOptions, compile_model
    np.savez(tmp_path / "x.npz", input=_models().token_spikes())
    return compile_model(CompileOptions(f"{MODELS}:{factory}", inputs=str(tmp_path / "x.npz"), stepping="multistep",
                                        target=target))


@pytest.mark.parametrize("factory", ["spikformer", "spikformer_soft"])
def test_every_lif_of_the_model_fires_and_rests(factory):
    """The weights make the test meaningful: every LIF spikes on some inputs and is silent on others."""
    from spikingjelly.activation_based import functional, neuron
    m = _models()
    net = getattr(m, factory)()
    rates = {}
    for name, mod in net.named_modules():
        if isinstance(mod, neuron.LIFNode):
            mod.register_forward_hook(lambda _m, _i, out, name=name: rates.__setitem__(name, float(out.mean())))
    functional.reset_net(net)
    with torch.no_grad():
        net(torch.from_numpy(m.token_spikes()).float())
    assert len(rates) == 5 and all(0.02 < r < 0.98 for r in rates.values()), rates


@needs_lava
@pytest.mark.parametrize("factory", ["spikformer", "spikformer_soft"])
def test_spikformer_ssa_is_bit_exact_on_lava(factory, tmp_path):
    c = _compile(factory, tmp_path)
    t = c.report["target"]
    assert c.report["equivalent"] is True
    assert t["bit_exact"] is True, t["first_mismatches"]
    assert t["quantization_checks"]["ok"], t["quantization_checks"]["failures"]
    p = t["products"]
    assert p["rewrite_check"]["equivalent"] is True
    # q @ k^T: binary x binary on chip, AND neurons as Lava's standard LIF; (attn * 0.125) @ v on the host
    assert p["binary_products_on_chip"] == ["attn.matmul"] and p["products_on_host"] == ["attn.matmul_1"]
    kinds = {x["name"]: x for x in t["processes"]}
    assert kinds["attn.matmul.and"]["type"] == "AND" and kinds["attn.matmul.and"]["chip_ready"] is True
    assert p["placement"][0]["process"] == "LIF" and p["per_inference"]["chip"]["and_neurons"] == 2 * 6 * 4 * 6
    assert p["per_inference"]["chip"]["and_spikes_per_inference"] > 0
    # the token-wise Linears: one Dense over the 6 x 8 flattened tokens into a 48-neuron population
    for lif in ("attn.q.lif", "attn.k.lif", "attn.v.lif", "attn.proj.lif"):
        assert kinds[lif]["type"] in ("LIF", "SpikecLIF")
        assert t["quantization"]["layers"][lif]["streams"][0]["source"] in ("input", "attn.attn_lif")
    tokenwise = [r["as"] for r in p["rewrites"] if "flat population" in r["as"]]
    assert len(tokenwise) == 5 and sum("BatchNorm" in r or "bn" in r for r in tokenwise) == 4
    assert t["spikes_compared"] > 0 and t["host_values_compared"] > 0


@needs_lava
def test_blocking_processes_are_named_with_a_remedy_in_report_and_summary(tmp_path):
    c = _compile("spikformer", tmp_path)
    r = c.report["target"]["chip_readiness"]
    assert len(r["blocking"]) == r["cpu_only"] > 0
    assert {b["name"] for b in r["blocking"]} == {x["name"] for x in r["cpu_only_processes"]}
    assert all(b["why"] and b["remedy"] for b in r["blocking"])
    # SpikingJelly fires on >=: behind synapses that is Lava's LIF (threshold one LSB lower); the LIF fed straight by
    # the host's attention values keeps SpikecLIF (its exact ties need the scale VTH / theta) and says so
    kinds = {p["name"]: p["type"] for p in c.report["target"]["processes"]}
    assert all(kinds[n] == "LIF" for n in ("attn.q.lif", "attn.k.lif", "attn.v.lif", "attn.proj.lif"))
    lif = next(b for b in r["blocking"] if b["name"] == "attn.attn_lif")
    assert "v >= vth" in lif["why"] and "synapse" in lif["remedy"]
    lines = c.report["target"]["summary"].splitlines()
    blockers = [x.strip() for x in lines if x.strip().startswith("chip blocker: ")]
    assert len(blockers) == min(8, r["cpu_only"]) + (r["cpu_only"] > 8)
    assert lines[-1].strip().startswith("chip-ready: ")   # the count stays the last line


def test_tokenwise_rewrite_computes_the_given_graph(tmp_path):
    """Before/after: the rewritten float graph (block-diagonal Dense, BatchNorm folded, flat populations) computes
    the traced graph's outputs; the neurons become vectors, read back through views."""
    from spikec.core.interpreter import run
    from spikec.targets.lava import products, tokens
    c = _compile("spikformer", tmp_path, target="none")
    g = c.graph
    after, records = tokens.lower(g)
    x = {"input": _models().token_spikes()}
    before_out, after_out = run(g, x), run(after, x)
    proof = products.check(g, before_out, after_out)
    assert proof["equivalent"] and proof["spike_mismatches"] == 0, proof
    assert max(proof["max_abs_difference"].values()) < 1e-9
    assert after.node("attn.q.lif").type.shape == (48,) and g.node("attn.q.lif").type.shape == (6, 8)
    assert after.node("attn.q.linear").params["weight"].shape == (48, 48)
    assert not [n for n in after.nodes if n.op == "batchnorm"]
    assert len(records) == 5


def test_kron_of_a_tokenwise_linear_is_block_diagonal():
    from spikec.ir.graph import Graph, Node, TensorType
    from spikec.targets.lava import tokens
    w, b = np.arange(6.0).reshape(2, 3), np.array([1.0, -1.0])
    x = Node("x", "input", (), TensorType((4, 3), "binary"))
    lin = Node("l", "linear", ("x",), TensorType((4, 2)), {}, {"weight": w, "bias": b})
    wk, bk = tokens._block_diagonal(Graph((x, lin), ("l",)), lin)
    assert wk.shape == (8, 12) and np.array_equal(wk[2:4, 3:6], w) and not wk[0:2, 3:].any()
    assert np.array_equal(bk, np.tile(b, 4))


@needs_lava
def test_a_tokenwise_linear_too_large_for_one_dense_is_refused_by_name(tmp_path, monkeypatch):
    from spikec.ir.errors import UnsupportedOp
    from spikec.targets.lava import tokens
    monkeypatch.setattr(tokens, "MAX_WEIGHTS", 100)
    with pytest.raises(UnsupportedOp, match=r"attn\.q\.linear.*not a vector"):
        _compile("spikformer", tmp_path)


def test_chip_blockers_of_synthetic_processes():
    net = {"processes": [
        {"name": "a", "type": "AND"}, {"name": "o", "type": "OR"},
        {"name": "s", "type": "SpikecLIF", "reset": "delayed_subtract", "fire": "ge", "period": 1},
        {"name": "r", "type": "Readout"}, {"name": "h", "type": "Host"}],
        "recorded": [{"proc": "s", "port": "v_out"}], "connections": []}
    arrays = {"s/dv": np.array([10, 20]), "s/bias_u": np.array([1, 1])}
    r = chip.readiness(net, arrays)
    assert (r["chip_ready"], r["cpu_only"]) == (2, 3)
    s = next(b for b in r["blocking"] if b["name"] == "s")
    for part in ("subtract", "one step late", "v >= vth", "current bias", "per-channel", "state"):
        assert part in s["why"], part
    assert "zero reset" in s["remedy"]
    assert [b["name"] for b in r["blocking"]] == ["s", "r", "h"]
    lines = chip.blocker_lines(r, limit=2)
    assert len(lines) == 3 and lines[-1].startswith("chip blocker: and 1 more (Host x1)")
    assert chip.verdict({"type": "AND"})["chip_ready"] and "vth = 1" in chip.verdict({"type": "AND"})["why"]
