"""The streaming ONNX model (``spikec/targets/onnx/streaming.py``): ``model_step.onnx`` is one time step with every
state an explicit input (``state.<node>.<var>``) and output (``state_out.<node>.<var>``), ``model_step_init.npz``
the initial states per sample.

For every stateful op with a step form, stepping the model T times from the init file (states threaded by hand)
equals the interpreter step for step (bit for bit: the step graph repeats the kernels' arithmetic); a stream three
times longer than the verification T, on fresh inputs, equals the interpreter run on those inputs (the point of
streaming); the init file's states broadcast over any B. Ops on virtual sub-steps are refused by name (the unrolled
model is still written). The digits example compiled with ``--target onnx`` writes and verifies both models.
"""
import json
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import spikec.frontend.norse  # noqa: F401  (defines lif_norse, li_norse)
import spikec.frontend.snntorch_neurons  # noqa: F401  (defines the snnTorch ops)
import spikec.frontend.spikingjelly  # noqa: F401  (defines lif_sj)
from spikec.app.driver import CompileOptions, compile_model, write_outdir
from spikec.app.verify import verify_outdir
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.ir.graph import TensorType
from spikec.core.verify import verify
from spikec.passes.unroll_virtual_steps import unroll_virtual_steps
from spikec.targets import TARGETS
from spikec.targets.onnx.streaming import (INIT_FILE, STEP_FILE, check_stream, export_step, load_init, run_stream,
                                           session, step_feeds)
from test_onnx_examples import EXAMPLES, cli
from test_onnx_ops import LIF_PER_CHANNEL, build, dyadic, rng

T, B = 6, 3


pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


def arr(d):
    return {k: np.asarray(v, dtype=np.float64) for k, v in d.items()}


def reads(op, attrs, params, rs, shape):
    """One node per read of one recurrence (they share one set of states)."""
    names = ["n"] + [f"n.{r}" for r in rs[1:]]
    return build(TensorType(shape), [(nm, op, ("x",), {**attrs, "read": r}, params) for nm, r in zip(names, rs)],
                 outputs=names)


r0 = rng(42)
C = 3
NORSE_PC = dict(dt_tau_mem_inv=[0.1, 0.25, 0.05], v_leak=[0.0, 0.1, -0.2], threshold=[0.5, 0.3, 0.4],
                v_reset=[0.0, -0.1, 0.05])
# name -> (graph, expected state names, bounded by T (per-step tables))
CASES = {
    "lif": (build(TensorType((C, 2, 2)), [
        ("lif", "lif", ("x",), {"reset": "subtract"}, arr(LIF_PER_CHANNEL)),
        ("lif.membrane", "lif", ("x",), {"reset": "subtract", "output": "membrane"}, arr(LIF_PER_CHANNEL)),
        ("hard", "lif", ("lif.membrane",), {"reset": "zero"}, arr(LIF_PER_CHANNEL))],
        outputs=["lif", "lif.membrane", "hard"]), ["state.lif.h", "state.hard.h"], False),
    "intfire": (build(TensorType((2, 6)), [
        ("q", "intfire", ("x",), {"max_spikes": 3, "rounding": "round"},
         arr(dict(beta=[1.0, 0.5], alpha=[1.0, 0.75], threshold=[0.5, 1.0], bias=[0.0, 0.25])))]),
        ["state.q.h"], False),
    "silif_csilif": (build(TensorType((C, 2)), [
        ("s1", "silif", ("x",), {"kappa": 0.5}, dict(decay=np.exp(-np.exp(r0.normal(size=C))),
                                                     b=r0.normal(1, 0.2, C), threshold=r0.uniform(0.5, 1.5, C))),
        ("c1", "csilif", ("x",), {"kappa": 0.5}, dict(a_re=r0.uniform(-0.5, 0.8, C), a_im=r0.uniform(-0.5, 0.5, C),
                                                      b=r0.normal(1, 0.2, C), threshold=r0.uniform(0.2, 1.0, C))),
        ("both", "add", ("s1", "c1"), {}, {})]),
        ["state.s1.u", "state.s1.s", "state.c1.m_re", "state.c1.m_im", "state.c1.s"], False),
    "lif_snntorch": (reads("lif_snntorch", {"reset": "subtract", "reset_delay": True},
                           arr(dict(beta=[0.9, 0.5, 1.0], threshold=[0.3, 1.0, -0.2])), ("spikes", "mem"), (C, 4)),
                     ["state.n.mem"], False),
    "lif_snntorch_immediate": (reads("lif_snntorch", {"reset": "zero", "reset_delay": False},
                                     arr(dict(beta=0.875, threshold=0.3)), ("spikes", "mem"), (C,)),
                               ["state.n.mem"], False),
    "synaptic_snntorch_linear": (reads("synaptic_snntorch", {"reset": "subtract", "reset_delay": True,
                                                             "recurrent": "linear"},
                                       {"weight": r0.integers(-4, 5, (5, 5)) / 16, "bias": r0.integers(-4, 5, 5) / 16,
                                        **arr(dict(alpha=0.75, beta=0.8, threshold=0.7))},
                                       ("spikes", "syn", "mem"), (5,)),
                                 ["state.n.syn", "state.n.mem", "state.n.spk"], False),
    "synaptic_snntorch": (reads("synaptic_snntorch", {"reset": "zero", "reset_delay": False, "recurrent": "none"},
                                arr(dict(alpha=[0.5, 0.7, 0.9], beta=[0.6, 0.8, 1.0], threshold=[0.3, 0.5, 0.7])),
                                ("spikes", "syn", "mem"), (C, 4)), ["state.n.syn", "state.n.mem"], False),
    "rleaky_snntorch_conv": (reads("rleaky_snntorch", {"reset": "zero", "reset_delay": True, "recurrent": "conv2d",
                                                       "padding": [1, 0]},
                                   {"weight": r0.integers(-4, 5, (C, C, 3, 1)) / 16,
                                    "bias": r0.integers(-4, 5, C) / 16, **arr(dict(beta=0.9, threshold=0.5))},
                                   ("spikes", "mem"), (C, 4, 5)), ["state.n.mem", "state.n.spk"], False),
    "alpha_snntorch": (reads("alpha_snntorch", {"reset": "subtract"},
                             arr(dict(alpha=[0.9, 0.8, 0.7], beta=[0.8, 0.6, 0.5], tau=[2.0, 1.5, 1.0],
                                      threshold=[0.3, 0.5, 0.2])), ("spikes", "syn_exc", "syn_inh", "mem"), (C, 2)),
                       ["state.n.syn_exc", "state.n.syn_inh", "state.n.mem"], False),
    "lif_sj": (build(TensorType((2, 3)), [
        ("soft", "lif_sj", ("x",), {"decay_input": True}, arr(dict(threshold=0.8, tau=2.0))),
        ("hard", "lif_sj", ("x",), {"decay_input": False}, arr(dict(threshold=0.6, decay=0.7, v_reset=-0.1))),
        ("both", "add", ("soft", "hard"), {}, {})]), ["state.soft.v", "state.hard.v"], False),
    "lif_norse": (reads("lif_norse", {"current": True, "reset": "value"},
                        arr({**NORSE_PC, "dt_tau_syn_inv": [0.2, 0.5, 0.1]}), ("spikes", "v", "i"), (C, 2)),
                  ["state.n.v", "state.n.i"], False),
    "li_norse": (reads("li_norse", {"current": False}, arr({k: NORSE_PC[k] for k in ("dt_tau_mem_inv", "v_leak")}),
                       ("v",), (C, 2)), ["state.n.v"], False),
    "tdm_delay": (build(TensorType((C,)), [
        ("tdm", "tdm", ("x",), {}, dict(lam=np.array([0.5, -0.25, 0.75]))),
        ("d1", "delay", ("tdm",), {"steps": 1}, {}),
        ("d3", "delay", ("x",), {"steps": 3}, {}),
        ("d0", "delay", ("x",), {"steps": 0}, {}),
        ("sum", "add", ("d1", "d3"), {}, {}),
        ("out", "add", ("sum", "d0"), {}, {})]), ["state.tdm.prev", "state.d1.buffer", "state.d3.buffer"], False),
    "bntt_step_bias": (build(TensorType((C, 2, 2)), [
        ("bntt", "bntt", ("x",), {"eps": 1e-5},
         dict(gamma=r0.normal(1, 0.3, (T, C)), beta=r0.normal(0, 0.3, (T, C)), mean=r0.normal(0, 0.3, (T, C)),
              var=r0.uniform(0.5, 2.0, (T, C)))),
        ("sb", "step_bias", ("bntt",), {}, dict(bias=r0.normal(0, 0.2, (T, C)))),
        ("lif", "lif", ("sb",), {"reset": "zero"}, arr(LIF_PER_CHANNEL))]),
        ["state.bntt.step", "state.sb.step", "state.lif.h"], True),
}
UNBOUNDED = [k for k, (_, _, bounded) in CASES.items() if not bounded]


def inputs(graph, seed, steps=T, batch=B):
    """Dyadic inputs around 0.3 (threshold ties happen), one array per graph input."""
    shape = graph.inputs[0].type.shape
    return dyadic(rng(seed), (steps, batch, *shape), scale=8) * 0.5 + 0.25


def stream_check(graph, x, **kw):
    model, init = export_step(graph)
    result = check_stream(model, graph, x, run(graph, x), init, **kw)
    assert result["spike_exact"] and result["equivalent"], result["first_mismatches"]
    assert result["steps"] == x.shape[0]
    return model, init, result


@pytest.mark.parametrize("case", list(CASES))
def test_step_model_equals_the_interpreter_step_by_step(case):
    graph, states, _ = CASES[case]
    x = inputs(graph, 1)
    model, init, result = stream_check(graph, x)
    assert result["max_rel_diff"] == 0.0, "the step graph repeats the kernels' arithmetic: bit for bit"
    assert result["nodes_compared"] == len(graph.nodes) - 1        # every IR value, every step
    assert list(init) == states
    ref = run(graph, x).values
    spiking = [n.name for n in graph.nodes if n.type.is_spike and n.op != "input"]
    assert not spiking or any(ref[s].any() and not ref[s].all() for s in spiking), "neurons must fire and rest"


@pytest.mark.parametrize("case", UNBOUNDED)
def test_a_stream_longer_than_the_verification_T(case):
    """3T steps on fresh inputs: the model is exported once and streams any length."""
    graph, _, _ = CASES[case]
    model, init = export_step(graph)
    x = inputs(graph, 7, steps=3 * T, batch=2)
    result = check_stream(model, graph, x, run(graph, x), init)
    assert result["spike_exact"] and result["equivalent"] and result["max_rel_diff"] == 0.0
    assert result["steps"] == 3 * T


@pytest.mark.parametrize("case", ["lif", "lif_norse", "tdm_delay", "bntt_step_bias"])
@pytest.mark.parametrize("batch", [1, 5])
def test_init_states_broadcast_over_any_batch(case, batch):
    graph, _, _ = CASES[case]
    model, init, _ = stream_check(graph, inputs(graph, 2, batch=batch))
    declared = {i.name: i.type.tensor_type.shape.dim for i in model.graph.input}
    for name, value in init.items():     # per sample: the model's [B, *state_shape] without B
        dims = declared[name]
        assert dims[0].dim_param == "B" and tuple(d.dim_value for d in dims[1:]) == value.shape


def test_norse_and_spikingjelly_states_start_at_rest():
    v = load_init_of(CASES["lif_norse"][0])["state.n.v"]
    assert np.array_equal(v, np.broadcast_to(np.array(NORSE_PC["v_leak"]).reshape(C, 1), (C, 2)))
    assert np.all(load_init_of(CASES["lif_sj"][0])["state.hard.v"] == -0.1)


def load_init_of(graph):
    return export_step(graph)[1]


def test_the_state_io_contract():
    graph, _, _ = CASES["tdm_delay"]
    model, init = export_step(graph)
    ins = [i.name for i in model.graph.input]
    outs = [o.name for o in model.graph.output]
    assert ins == ["input", "state.tdm.prev", "state.d1.buffer", "state.d3.buffer"]
    assert outs == ["out", "state_out.tdm.prev", "state_out.d1.buffer", "state_out.d3.buffer"]
    assert init["state.d3.buffer"].shape == (3, C) and not init["state.d3.buffer"].any()
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["spikec.states"]) == list(init) and meta["spikec.max_steps"] == "unbounded"
    # the lif and its membrane twin share one recurrence: one state
    assert list(export_step(CASES["lif"][0])[1]) == ["state.lif.h", "state.hard.h"]


def test_several_inputs_keep_their_ir_names():
    from spikec.ir.graph import Graph, Node
    t = TensorType((C,))
    g = verify(Graph((Node("a", "input", (), t), Node("b", "input", (), t), Node("s", "add", ("a", "b"), t),
                      Node("n", "lif", ("s",), TensorType((C,), "binary"), {"reset": "zero"},
                           {k: np.array(v) for k, v in dict(beta=0.9, alpha=1.0, bias=0.0, threshold=1.0,
                                                             v_reset=0.0).items()})), ("n",)))
    model, init = export_step(g)
    assert [i.name for i in model.graph.input] == ["a", "b", "state.n.h"]
    x = {"a": inputs(g, 3), "b": inputs(g, 4)}
    result = check_stream(model, g, x, run(g, x), init)
    assert result["spike_exact"] and result["equivalent"]


def test_per_step_tables_bound_the_stream():
    """BNTT / step_bias hold T steps of statistics: the step index is a state, and step T has none."""
    graph, _, _ = CASES["bntt_step_bias"]
    model, init = export_step(graph)
    assert {p.key: p.value for p in model.metadata_props}["spikec.max_steps"] == str(T)
    assert init["state.bntt.step"].dtype == np.int64 and init["state.bntt.step"].shape == ()
    feeds = step_feeds(graph, inputs(graph, 5, steps=T + 1), np.float64)
    with pytest.raises(Exception, match="(?i)indices|bound"):
        run_stream(session(model), feeds, init)


def refused_graph():
    g = build(TensorType((10,)), [
        ("q", "intfire", ("x",), {"max_spikes": 2, "rounding": "round"},
         arr(dict(beta=1.0, alpha=1.0, threshold=0.5))),
        ("lin", "linear", ("q",), {}, {"weight": np.eye(3, 10)}),
        ("lif", "lif", ("lin",), {"reset": "subtract"}, arr(dict(beta=0.9, alpha=1.0, bias=0.0, threshold=1.0,
                                                                  v_reset=0.0)))])
    return verify(unroll_virtual_steps(g).graph)


def test_a_refused_op_is_named_and_the_unrolled_model_is_still_written():
    g = refused_graph()
    with pytest.raises(UnsupportedOp, match="node 'q'.*intfire_unrolled"):
        export_step(g)
    x = dyadic(rng(0), (4, 2, 10), scale=4)
    res = TARGETS["onnx"](g, x, run(g, x), {})
    s = res.report["streaming"]
    assert s["written"] is False and "intfire_unrolled" in s["refused"] and "'q'" in s["refused"]
    assert res.ok and res.report["spike_exact"] and set(res.files) == {"model.onnx"}


# -- the digits example through the CLI ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    model, weights, inp = EXAMPLES["digits"]
    c = compile_model(CompileOptions(model, weights=str(weights), inputs=str(inp), target="onnx"))
    return c, write_outdir(tmp_path_factory.mktemp("digits") / "out", c)


def test_digits_writes_and_verifies_both_models(digits):
    c, out = digits
    s = json.loads((out / "report.json").read_text())["target"]["streaming"]
    assert s["written"] and s["spike_exact"] and s["equivalent"] and s["refused"] is None
    assert s["steps"] == 8 and s["states"] == ["state.lif1.h", "state.lif2.h"] and s["spikes_compared"] > 0
    assert (out / "model.onnx").is_file() and (out / STEP_FILE).is_file() and (out / INIT_FILE).is_file()
    v = verify_outdir(out)
    assert v["target_onnx"]["equivalent"] and v["target_onnx"]["streaming"]["spike_exact"]
    # a stream of 3T steps of fresh rate-coded digits, from the written files, equals the interpreter
    x = (rng(9).random((24, 4, 1, 8, 8)) < 0.3).astype(np.float64)
    model = onnx.load(str(out / STEP_FILE))
    result = check_stream(model, c.graph, x, run(c.graph, x), load_init(out / INIT_FILE), probe=False)
    assert result["spike_exact"] and result["equivalent"] and result["steps"] == 24
    r = cli("verify", out)
    assert r.exit_code == 0, r.output


def test_verify_fails_on_a_corrupted_or_missing_step_model(digits, tmp_path):
    c, out = digits
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    model = onnx.load(str(bad / STEP_FILE))
    w = next(i for i in model.graph.initializer if i.name.startswith("head.1"))
    a = numpy_helper.to_array(w).copy()
    a.flat[0] += 1.0
    w.CopyFrom(numpy_helper.from_array(a, w.name))
    onnx.save(model, str(bad / STEP_FILE))
    v = verify_outdir(bad)
    assert not v["target_onnx"]["equivalent"] and not v["target_onnx"]["streaming"]["equivalent"]
    (bad / STEP_FILE).unlink()          # report.json says it was written: a missing file fails too
    v = verify_outdir(bad)
    assert not v["target_onnx"]["equivalent"] and "error" in v["target_onnx"]["streaming"]
    r = cli("verify", bad)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
