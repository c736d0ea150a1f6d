"""No vacuous proof (spikec/app/vacuity.py): each warning kind on a small real graph run by the interpreter,
and none on a healthy one."""
import numpy as np
import pytest

from spikec.app.vacuity import DECAYS, format_warning, warnings_for
from spikec.core.builder import GraphBuilder
from spikec.core.interpreter import run
from spikec.ir.graph import Node, TensorType

T, B, N_IN, HIDDEN = 6, 4, 5, 3


def lif_params(beta=0.9, threshold=0.5):
    return {"beta": beta, "alpha": 1.0, "bias": 0.0, "threshold": threshold, "v_reset": 0.0}


def inputs(seed=0, steps=T, batch=B):
    return np.random.default_rng(seed).random((steps, batch, N_IN))


def net(threshold=0.5, beta=0.9, out_weight=None, out_bias=None):
    """input -> fc -> lif -> out (a real read-out)."""
    b = GraphBuilder((N_IN,), "real")
    weight = np.random.default_rng(1).normal(0, 0.6, (HIDDEN, N_IN))
    b.add("fc", "linear", ["x"], params={"weight": weight, "bias": np.zeros(HIDDEN)})
    b.add("lif", "lif", ["fc"], {"reset": "subtract"}, lif_params(beta, threshold), scope="layers.1")
    b.add("out", "linear", ["lif"], params={
        "weight": np.eye(2, HIDDEN) if out_weight is None else out_weight,
        "bias": np.zeros(2) if out_bias is None else out_bias})
    return b.graph("out")


def warned(graph, x):
    return warnings_for(graph, run(graph, x), x)


def kinds(ws):
    return [(w["node"], w["kind"]) for w in ws]


def test_a_healthy_graph_gets_no_warning():
    graph, x = net(), inputs()
    spikes = run(graph, x).values["lif"]
    assert 0 < spikes.mean() < 1 and len(np.unique(spikes)) == 2  # it fires, not everywhere
    assert warned(graph, x) == []


def test_a_neuron_that_never_fires_is_silent_with_figures_and_a_remedy():
    graph, x = net(threshold=100.0), inputs()
    ws = warned(graph, x)
    assert kinds(ws) == [("lif", "silent"), ("out", "constant")]  # a silent layer leaves the read-out constant
    msg = ws[0]["message"]
    assert "'lif' (lif, module 'layers.1')" in msg
    assert f"0 spikes in {T * B * HIDDEN} values ({T} steps x {B} samples x {HIDDEN} neurons)" in msg
    assert "zeros with zeros" in msg and "--inputs" in msg and "--dt" in msg
    margin = run(graph, x).margins["lif"].min()
    assert f"min |U - boundary| = {margin:.3g}" in msg and margin > 90
    assert format_warning(ws[0]) == f"warning: lif: {msg}"


def test_silence_upstream_is_named_and_a_silent_spike_output_is_reported_once():
    b = GraphBuilder((N_IN,), "real")
    b.add("fc", "linear", ["x"], params={"weight": np.full((HIDDEN, N_IN), 0.1), "bias": np.zeros(HIDDEN)})
    b.add("lif1", "lif", ["fc"], {"reset": "subtract"}, lif_params(threshold=50.0))
    b.add("lif2", "lif", ["lif1"], {"reset": "subtract"}, lif_params(threshold=0.5))
    b.add("spikes", "relu", ["lif2"])  # a spike-valued output that is not a neuron
    graph, x = b.graph("spikes"), inputs()
    ws = warned(graph, x)
    assert kinds(ws) == [("lif1", "silent"), ("lif2", "silent"), ("spikes", "silent")]  # not also "constant"
    assert "its input 'lif1' is zero throughout" in ws[1]["message"]
    assert "its input" not in ws[0]["message"]  # fc carries non-zero values
    assert "graph output 'spikes' (relu)" in ws[2]["message"]


def test_all_zero_inputs_are_said():
    graph = net()
    x = np.zeros((T, B, N_IN))
    ws = warned(graph, x)
    assert ("lif", "silent") in kinds(ws)
    assert "the verification inputs are all zero" in ws[0]["message"]


def test_a_neuron_firing_everywhere_is_saturated():
    graph, x = net(threshold=-1.0), inputs()
    ws = warned(graph, x)
    assert kinds(ws) == [("lif", "saturated"), ("out", "constant")]
    assert f"{T * B * HIDDEN} of {T * B * HIDDEN} values" in ws[0]["message"] and "ones with ones" in ws[0]["message"]


def test_an_integer_neuron_at_its_ceiling_is_saturated_and_below_it_is_not():
    def graph_with(threshold):
        b = GraphBuilder((N_IN,), "real")
        b.add("fc", "linear", ["x"], params={"weight": np.ones((HIDDEN, N_IN)), "bias": np.full(HIDDEN, 5.0)})
        b.add("q", "intfire", ["fc"], {"max_spikes": 2, "rounding": "round"},
              {"beta": 1.0, "alpha": 1.0, "threshold": threshold})
        b.add("out", "linear", ["q"], params={"weight": np.eye(2, HIDDEN), "bias": np.zeros(2)})
        return b.graph("out")
    x = inputs()
    ws = warned(graph_with(0.5), x)
    assert ("q", "saturated") in kinds(ws) and "at its ceiling of 2 spikes per step" in ws[0]["message"]
    ws = warned(graph_with(4.0), x)
    values = run(graph_with(4.0), x).values["q"]
    assert values.max() == 2 and values.min() < 2  # it reaches the ceiling, but not everywhere
    assert ("q", "saturated") not in kinds(ws)


@pytest.mark.parametrize("beta,flagged,what", [
    (-0.5, True, "flips its sign every step"), (1.5, True, "grows every step"), (float("nan"), True, "not a number"),
    (-1.5, True, "and grows"), (0.0, False, ""), (1.0, False, ""), (-1e-16, False, ""),  # lif's stateless form
])
def test_a_lif_decay_outside_0_1_is_flagged(beta, flagged, what):
    graph, x = net(beta=beta), inputs()
    ws = [w for w in warned(graph, x) if w["kind"] == "decay"]
    assert bool(ws) == flagged
    if flagged:
        assert ws[0]["node"] == "lif" and "beta = " in ws[0]["message"] and what in ws[0]["message"]
        assert "--dt" in ws[0]["message"] and "(0, 1]" in ws[0]["message"]


def test_a_per_channel_decay_names_the_channel_and_the_count():
    graph, x = net(beta=np.array([0.9, -0.25, 1.2])), inputs()
    (w,) = [w for w in warned(graph, x) if w["kind"] == "decay"]
    assert "beta = -0.25 at channel 1" in w["message"] and "(2 of 3 channels are, from -0.25 to 1.2)" in w["message"]


def test_silif_and_csilif_decays():
    b = GraphBuilder((N_IN,), "real")
    b.add("fc", "linear", ["x"], params={"weight": np.ones((HIDDEN, N_IN)), "bias": np.zeros(HIDDEN)})
    b.add("s_ok", "silif", ["fc"], {"kappa": 0.5}, {"decay": np.full(HIDDEN, 0.8), "b": np.ones(HIDDEN),
                                                   "threshold": np.ones(HIDDEN)})
    b.add("s_zero", "silif", ["fc"], {"kappa": 0.5}, {"decay": np.zeros(HIDDEN), "b": np.ones(HIDDEN),
                                                     "threshold": np.ones(HIDDEN)})
    a = {"b": np.ones(HIDDEN), "threshold": np.ones(HIDDEN)}
    b.add("c_ok", "csilif", ["fc"], {"kappa": 0.5}, {"a_re": np.full(HIDDEN, 0.6), "a_im": np.full(HIDDEN, 0.7), **a})
    b.add("c_big", "csilif", ["fc"], {"kappa": 0.5}, {"a_re": np.full(HIDDEN, 0.8), "a_im": np.full(HIDDEN, 0.7), **a})
    graph = b.graph("s_ok", "s_zero", "c_ok", "c_big")
    ws = [w for w in warned(graph, inputs()) if w["kind"] == "decay"]
    assert [w["node"] for w in ws] == ["s_zero", "c_big"]
    assert "forgets its membrane every step" in ws[0]["message"]  # silif has no stateless form: 0 is flagged
    assert f"|a| = hypot(a_re, a_im) = {np.hypot(0.8, 0.7):.6g} at channel 0" in ws[1]["message"]


def node(op, **params):
    return Node("n", op, ("x",), TensorType((2,), "binary"), {}, params)


@pytest.mark.parametrize("op,params,decay", [
    ("lif_snntorch", {"beta": 0.95, "threshold": 1.0}, 0.95),
    ("lif_sj", {"threshold": 1.0, "tau": 2.0}, 0.5),                 # SpikingJelly LIFNode: 1 - 1/tau
    ("lif_sj", {"threshold": 1.0, "tau": 0.8}, 1 - 1 / 0.8),         # tau < 1: negative
    ("lif_sj", {"threshold": 1.0, "decay": 0.25}, 0.75),             # ParametricLIFNode: 1 - k
    ("lif_sj", {"threshold": 1.0}, None),                            # IFNode: no decay
    ("lif_norse", {"dt_tau_mem_inv": 0.1, "dt_tau_syn_inv": 2.5}, [0.9, -1.5]),  # Norse: 1 - dt/tau each
])
def test_framework_ops_decay_rules(op, params, decay):
    got = DECAYS[op].of(node(op, **params))
    values = [float(v) for _, v in got]
    assert values == pytest.approx([] if decay is None else np.atleast_1d(decay).tolist())


def test_a_membrane_read_out_twin_is_warned_once():
    b = GraphBuilder((N_IN,), "real")
    b.add("fc", "linear", ["x"], params={"weight": np.ones((HIDDEN, N_IN)), "bias": np.zeros(HIDDEN)})
    b.add("lif", "lif", ["fc"], {"reset": "subtract"}, lif_params(beta=-0.5, threshold=2.0))
    b.add("lif.membrane", "lif", ["fc"], {"reset": "subtract", "output": "membrane"},
          lif_params(beta=-0.5, threshold=2.0))
    graph, x = b.graph("lif", "lif.membrane"), inputs()
    assert [w for w in kinds(warned(graph, x)) if w[1] == "decay"] == [("lif", "decay")]


def test_a_constant_output_and_its_limits():
    graph = net(out_weight=np.zeros((2, HIDDEN)), out_bias=np.array([0.25, 0.25]))
    ws = warned(graph, inputs())
    assert kinds(ws) == [("out", "constant")]
    assert f"all {T * B * 2} of its values equal 0.25" in ws[0]["message"]
    assert "inputs themselves" not in ws[0]["message"]
    one = inputs(steps=1, batch=1)
    assert warned(graph, one) == []  # one step of one sample: nothing can vary
    same = np.broadcast_to(inputs(steps=1, batch=1), (T, B, N_IN))
    assert "inputs themselves are the same" in warned(graph, same)[0]["message"]


def test_order_is_graph_order_and_within_a_node_that_of_kinds():
    b = GraphBuilder((N_IN,), "real")
    b.add("fc", "linear", ["x"], params={"weight": np.ones((HIDDEN, N_IN)), "bias": np.zeros(HIDDEN)})
    b.add("z_first", "lif", ["fc"], {"reset": "subtract"}, lif_params(beta=2.0, threshold=1e9))
    b.add("a_second", "lif", ["fc"], {"reset": "subtract"}, lif_params(threshold=-1.0))
    graph, x = b.graph("a_second", "z_first"), inputs()
    ws = warned(graph, x)
    assert kinds(ws) == [("z_first", "decay"), ("z_first", "silent"), ("a_second", "saturated")]
    assert warned(graph, x) == ws  # deterministic


def test_nodes_a_trace_did_not_record_are_skipped_and_named_inputs_work():
    graph, x = net(threshold=100.0), inputs()
    outputs_only = run(graph, x, record="outputs")
    assert kinds(warnings_for(graph, outputs_only, {"x": x})) == [("out", "constant")]


def test_a_framework_exact_neuron_traced_from_snntorch_is_checked_too():
    """lif_snntorch is only ``stateful`` in the op registry: it is told a neuron by its margins / decay rule."""
    snntorch = pytest.importorskip("snntorch")
    import torch
    from torch import nn

    from spikec.frontend import trace
    from spikec.frontend.snntorch import SnnTorchMultiStep
    torch.manual_seed(0)
    model = nn.Sequential(SnnTorchMultiStep(snntorch.Leaky(beta=0.8, threshold=1e6)))
    graph = trace(model, input_shape=(N_IN,), input_kind="real")
    (leaky,) = [n for n in graph.nodes if n.op == "lif_snntorch"]
    ws = warned(graph, inputs())
    assert kinds(ws) == [(leaky.name, "silent")]
    assert "neuron" in ws[0]["message"] and "graph output" not in ws[0]["message"]


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # Norse's import
def test_a_norse_lif_with_dt_above_tau_is_warned_once_for_its_three_read_outs():
    nt = pytest.importorskip("norse.torch", reason="Norse is an optional extra")
    import torch
    from torch import nn

    from spikec.frontend import trace

    class Net(nn.Module):
        def __init__(self, tau_mem_inv):
            super().__init__()
            self.fc = nn.Linear(N_IN, HIDDEN)
            self.lif = nt.LIF(nt.LIFParameters(tau_mem_inv=torch.tensor(tau_mem_inv), v_th=torch.tensor(0.1)),
                              dt=1e-3, record_states=True)

        def forward(self, x):
            z, s = self.lif(self.fc(x))
            return z, s.v, s.i  # the read-outs reach outputs: the tracer keeps only what does

    torch.manual_seed(0)
    graph = trace(Net(2500.0), input_shape=(N_IN,), input_kind="real")
    assert [n.op for n in graph.nodes].count("lif_norse") == 3  # spikes, v and i: one neuron
    ws = [w for w in warned(graph, inputs()) if w["kind"] == "decay"]
    assert [w["node"] for w in ws] == ["lif"]
    assert "1 - dt_tau_mem_inv = -1.5" in ws[0]["message"] and "flips its sign every step and grows" in ws[0]["message"]
    assert not [w for w in warned(trace(Net(100.0), input_shape=(N_IN,), input_kind="real"), inputs())
                if w["kind"] == "decay"]
