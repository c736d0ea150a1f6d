"""The ONNX target op by op on hand-built IR graphs: each exported model passes onnx.checker and, run in
onnxruntime, reproduces the reference interpreter's spikes exactly (real values within 1e-9 relative).

Pure element-wise graphs (neurons, BN, TDM, delays, ...) must even be bit-identical: the emitters repeat the
interpreter's arithmetic operation by operation. Graphs with reductions (conv, linear, DS-MPA) may differ by
a few ulp in real values, never in spikes.
"""
import numpy as np
import onnx
import pytest

from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import OPS, define, infer_type
from spikec.core.verify import verify
from spikec.passes.unroll_virtual_steps import unroll_virtual_steps
from spikec.targets.onnx import check_model_against, export, run_model


def build(in_type: TensorType, specs, outputs=None) -> Graph:
    """Input ``x`` then ``specs`` = [(name, op, inputs, attrs, params)], each node typed by ``infer_type``."""
    nodes, types = [Node("x", "input", (), in_type)], {"x": in_type}
    for name, op, ins, attrs, params in specs:
        n = Node(name, op, ins, TensorType((1,)), attrs, params)
        n = n.with_(type=infer_type(n, [types[i] for i in ins]))
        types[name] = n.type
        nodes.append(n)
    return verify(Graph(tuple(nodes), tuple(outputs or [nodes[-1].name])))


def check(graph: Graph, x, *, bit_exact=False) -> dict:
    """Export for x's T in both forms (the default, a loop where the graph has a step form, and the unrolled
    one), run each in onnxruntime, compare every node with the interpreter; the default form's result."""
    ref, results = run(graph, x), []
    for form in ("auto", "unrolled"):
        model = export(graph, x.shape[0] // graph.inputs[0].type.substeps, form=form)
        onnx.checker.check_model(model, full_check=True)
        result = check_model_against(model, graph, x, ref)
        assert result["spike_exact"], (form, result["first_mismatches"])
        assert result["equivalent"], (form, result["first_mismatches"])
        assert result["nodes_compared"] == len(graph.nodes) - 1
        if bit_exact:
            assert result["max_rel_diff"] == 0.0, (form, result)
        results.append(result)
    return results[0]


def op_types(model: onnx.ModelProto) -> set[str]:
    """The ONNX op types of the model, those inside the loop's body included."""
    def walk(g):
        for n in g.node:
            yield n.op_type
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    yield from walk(a.g)
    return set(walk(model.graph))


def rng(seed=0):
    return np.random.default_rng(seed)


def spikes(r, shape, p=0.4):
    return (r.random(shape) < p).astype(np.float64)


def dyadic(r, shape, scale=8):
    """Multiples of 1/scale: sums are exact, so threshold ties really happen."""
    return r.integers(-2 * scale, 3 * scale, shape) / scale


# -- neurons: every T, both resets, scalar and per-channel parameters, ties -------------------------
LIF_PER_CHANNEL = dict(beta=[0.5, 0.9, 1.0], alpha=[1.0, 0.5, 2.0], bias=[0.0, 0.125, -0.25],
                       threshold=[1.0, 0.5, 0.75], v_reset=[0.0, 0.25, -0.5])
LIF_SCALAR = dict(beta=0.9, alpha=1.0, bias=0.0, threshold=1.0, v_reset=0.0)


@pytest.mark.parametrize("T", [1, 2, 3, 7, 16])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_lif(T, reset, per_channel):
    params = {k: np.array(v) for k, v in (LIF_PER_CHANNEL if per_channel else LIF_SCALAR).items()}
    r = rng(T)
    g = build(TensorType((3, 4, 5)), [
        ("lif", "lif", ("x",), {"reset": reset}, params),
        ("lif.membrane", "lif", ("x",), {"reset": reset, "output": "membrane"}, params),
    ], outputs=["lif", "lif.membrane"])
    x = dyadic(r, (T, 2, 3, 4, 5))
    result = check(g, x, bit_exact=True)
    assert result["spikes_compared"] == x.size
    ref = run(g, x)
    assert ref.values["lif"].any() and not ref.values["lif"].all()
    assert (ref.margins["lif"] == 0).any(), "dyadic inputs should produce exact threshold ties"


@pytest.mark.parametrize("T", [1, 4, 9])
@pytest.mark.parametrize("rounding", ["round", "floor"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_intfire(T, rounding, per_channel):
    params = dict(beta=np.array([1.0, 0.5]), alpha=np.array([1.0, 0.75]), threshold=np.array([0.5, 1.0]),
                  bias=np.array([0.0, 0.25])) \
        if per_channel else dict(beta=np.array(0.875), alpha=np.array(1.0), threshold=np.array(0.5))
    g = build(TensorType((2, 6)), [("q", "intfire", ("x",), {"max_spikes": 3, "rounding": rounding}, params),
                                   ("q.membrane", "intfire", ("x",),
                                    {"max_spikes": 3, "rounding": rounding, "output": "membrane"}, params)],
              outputs=["q", "q.membrane"])
    x = dyadic(rng(T), (T, 3, 2, 6), scale=4)    # z + 0.5 lands on integers: rounding ties
    check(g, x, bit_exact=True)
    q = run(g, x).values["q"]
    assert set(np.unique(q)) >= {0.0, 1.0} and q.max() <= 3


@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "per_channel"])
def test_intfire_with_a_membrane_floor(per_channel):
    """``v_min`` (Sinabs's min_v_mem): the residual clamped below after the reset, as ``relu(h - v_min) + v_min``."""
    v_min = np.array([-0.5, -1.0]) if per_channel else np.array(-0.75)
    params = dict(beta=np.array(1.0), alpha=np.array(1.0), threshold=np.array(0.5), v_min=v_min)
    g = build(TensorType((2, 6)), [("q", "intfire", ("x",), {"max_spikes": 3, "rounding": "floor"}, params),
                                   ("q.membrane", "intfire", ("x",),
                                    {"max_spikes": 3, "rounding": "floor", "output": "membrane"}, params)],
              outputs=["q", "q.membrane"])
    x = dyadic(rng(6), (6, 3, 2, 6), scale=4) - 0.5   # negative drive: the floor is reached
    check(g, x, bit_exact=True)
    unclamped = build(TensorType((2, 6)), [("q", "intfire", ("x",), {"max_spikes": 3, "rounding": "floor"},
                                            {k: v for k, v in params.items() if k != "v_min"})], outputs=["q"])
    assert not np.array_equal(run(g, x).values["q"], run(unclamped, x).values["q"])   # the clamp mattered


@pytest.mark.parametrize("dyadic_inputs", [True, False], ids=["ties", "real"])
@pytest.mark.parametrize("rounding", ["round", "floor"])
@pytest.mark.parametrize("D", [1, 2, 4])
def test_intfire_unrolled_with_synapse(rounding, D, dyadic_inputs):
    """intfire -> conv -> lif, then unroll_virtual_steps: sub-step spikes, a conv on sub-steps, substep_sum."""
    r = rng(D)
    g = build(TensorType((2, 5, 5)), [
        ("q", "intfire", ("x",), {"max_spikes": D, "rounding": rounding},
         dict(beta=np.array([1.0, 0.75]), alpha=np.array(1.0), threshold=np.array([0.5, 1.0]),
              bias=np.array([0.25, -0.125]))),
        ("pool", "maxpool2d", ("q",), {"kernel": (2, 2), "stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                                       "ceil_mode": False}, {}),
        ("conv", "conv2d", ("pool",), {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
         {"weight": r.normal(size=(3, 2, 3, 3)), "bias": r.normal(size=3)}),
        ("lif", "lif", ("conv",), {"reset": "subtract"}, {k: np.array(v) for k, v in LIF_SCALAR.items()}),
        ("late", "delay", ("q",), {"steps": 1}, {}),
    ], outputs=["lif", "q", "late"])
    deployed = verify(unroll_virtual_steps(g).graph)
    assert "intfire_unrolled" in {n.op for n in deployed.nodes} and "substep_sum" in {n.op for n in deployed.nodes}
    x = dyadic(r, (5, 2, 2, 5, 5), scale=4) if dyadic_inputs else r.normal(0.7, 1.0, (5, 2, 2, 5, 5))
    result = check(deployed, x)
    assert result["spikes_compared"] > 0


def test_silif_and_csilif():
    r = rng(3)
    c = 4
    g = build(TensorType((c, 3, 3)), [
        ("s1", "silif", ("x",), {"kappa": 0.5},
         dict(decay=np.exp(-np.exp(r.normal(size=c))), b=r.normal(1, 0.2, c), threshold=r.uniform(0.5, 1.5, c))),
        ("s1.membrane", "silif", ("x",), {"kappa": 0.5, "output": "membrane"},
         dict(decay=np.exp(-np.exp(r.normal(size=c))), b=r.normal(1, 0.2, c), threshold=r.uniform(0.5, 1.5, c))),
        ("c1", "csilif", ("x",), {"kappa": 0.5},
         dict(a_re=r.uniform(-0.5, 0.8, c), a_im=r.uniform(-0.5, 0.5, c), b=r.normal(1, 0.2, c),
              threshold=r.uniform(0.2, 1.0, c))),
        ("both", "add", ("s1", "c1"), {}, {}),
    ], outputs=["both", "s1.membrane"])
    check(g, r.normal(0.5, 1.0, (10, 3, c, 3, 3)), bit_exact=True)


# -- time and element-wise ops ---------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 3, 6, 9])
def test_delay(k):
    """Delays shorter than, equal to and longer than T = 6."""
    g = build(TensorType((2, 3), "binary"), [("d", "delay", ("x",), {"steps": k}, {})])
    check(g, spikes(rng(k), (6, 2, 2, 3)), bit_exact=True)


@pytest.mark.parametrize("T", [1, 5])
def test_elementwise_and_per_step_ops(T):
    r = rng(T)
    c = 3
    g = build(TensorType((c, 4, 4)), [
        ("bntt", "bntt", ("x",), {"eps": 1e-5},
         dict(gamma=r.normal(1, 0.3, (T, c)), beta=r.normal(0, 0.3, (T, c)), mean=r.normal(0, 0.3, (T, c)),
              var=r.uniform(0.5, 2.0, (T, c)))),
        ("tdm", "tdm", ("bntt",), {}, dict(lam=r.uniform(-0.5, 0.5, c))),
        ("sb", "step_bias", ("tdm",), {}, dict(bias=r.normal(0, 0.2, (T, c)))),
        ("sc", "scale", ("sb",), {"a": 0.75, "b": 0.125}, {}),
        ("act", "relu", ("sc",), {}, {}),
        ("lif", "lif", ("act",), {"reset": "zero"}, {k: np.array(v) for k, v in LIF_SCALAR.items()}),
        ("gate", "mul", ("lif", "act"), {}, {}),
        ("sum", "add", ("lif", "lif"), {}, {}),
        ("flat", "flatten", ("sum",), {"start": 1, "end": 2}, {}),
    ], outputs=["flat", "gate"])
    check(g, r.normal(0.5, 1.0, (T, 2, c, 4, 4)), bit_exact=True)


def test_batchnorm_unfolded():
    """torch evaluates inference BN as ``x * alpha + beta`` with a fused multiply-add (on FMA CPUs); ONNX has no
    FMA op, so an unfolded BN agrees to an ulp, and the spikes it drives are still identical."""
    r = rng(8)
    c = 3
    g = build(TensorType((c, 4, 4)), [
        ("bn", "batchnorm", ("x",), {"eps": 1e-5},
         dict(gamma=r.normal(1, 0.3, c), beta=r.normal(0, 0.3, c), mean=r.normal(0, 0.3, c),
              var=r.uniform(0.5, 2.0, c))),
        ("lif", "lif", ("bn",), {"reset": "subtract"}, {k: np.array(v) for k, v in LIF_PER_CHANNEL.items()}),
    ], outputs=["lif"])
    result = check(g, r.normal(0.5, 1.0, (6, 4, c, 4, 4)))
    assert result["max_rel_diff"] < 1e-15


# -- synaptic and pooling ops -----------------------------------------------------------------------
CONVS = [  # stride, padding, dilation, groups, kernel
    ((1, 1), (1, 1), (1, 1), 1, (3, 3)),
    ((2, 2), (1, 1), (1, 1), 1, (3, 3)),
    ((1, 2), (0, 2), (2, 1), 1, (3, 2)),
    ((1, 1), (0, 0), (1, 1), 2, (1, 1)),
    ((2, 1), (1, 0), (1, 1), 4, (3, 3)),
]


@pytest.mark.parametrize("stride,padding,dilation,groups,kernel", CONVS)
def test_conv2d(stride, padding, dilation, groups, kernel):
    r = rng(groups)
    c_in, c_out = 4, 8
    g = build(TensorType((c_in, 7, 6), "binary"), [
        ("conv", "conv2d", ("x",), {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups},
         {"weight": r.normal(size=(c_out, c_in // groups, *kernel)), "bias": r.normal(size=c_out)}),
        ("lif", "lif", ("conv",), {"reset": "subtract"}, {k: np.array(v) for k, v in LIF_SCALAR.items()}),
    ], outputs=["lif", "conv"])
    result = check(g, spikes(r, (4, 3, c_in, 7, 6)))
    assert result["max_rel_diff"] < 1e-12


def test_integer_graph_is_bit_exact_through_every_synapse():
    """All-int64 parameters: the interpreter runs in exact integers; sums below 2**53 are exact in float64 in
    any order, so the im2col conv, the linear and the window sum must match bit for bit."""
    r = rng(9)
    g = build(TensorType((3, 7, 7), "binary"), [
        ("conv", "conv2d", ("x",), {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 1},
         {"weight": r.integers(-3, 4, (4, 3, 3, 3)), "bias": r.integers(-2, 3, 4)}),
        ("gconv", "conv2d", ("conv",), {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 2},
         {"weight": r.integers(-3, 4, (6, 2, 3, 3))}),
        ("pool", "maxpool2d", ("gconv",), {"kernel": (2, 2), "stride": (1, 1), "padding": (0, 0),
                                           "dilation": (1, 1), "ceil_mode": False}, {}),
        ("act", "relu", ("pool",), {}, {}),
        ("ws", "windowsum", ("act",), {"kernel": 3, "dilation": 1}, {}),
        ("flat", "flatten", ("ws",), {"start": 0, "end": -1}, {}),
        ("fc", "linear", ("flat",), {}, {"weight": r.integers(-5, 6, (3, 6 * 3 * 6)), "bias": r.integers(-4, 5, 3)}),
        ("aff", "scale", ("fc",), {"a": 3, "b": -2}, {}),
        ("late", "delay", ("aff",), {"steps": 1}, {}),
        ("sq", "mul", ("late", "fc"), {}, {}),
    ])
    x = spikes(r, (4, 3, 3, 7, 7))
    assert run(g, x).values["sq"].dtype == np.int64
    check(g, x, bit_exact=True)


def test_linear_and_windowsum():
    r = rng(7)
    g = build(TensorType((2, 6, 6), "binary"), [
        ("ws", "windowsum", ("x",), {"kernel": 3, "dilation": 2}, {}),
        ("ws1", "windowsum", ("x",), {"kernel": 1, "dilation": 1}, {}),
        ("both", "add", ("ws", "ws1"), {}, {}),
        ("flat", "flatten", ("both",), {"start": 0, "end": -1}, {}),
        ("fc", "linear", ("flat",), {}, {"weight": r.normal(size=(5, 72)), "bias": r.normal(size=5)}),
        ("fc2", "linear", ("fc",), {}, {"weight": r.normal(size=(3, 5))}),
    ], outputs=["fc2", "both"])
    check(g, spikes(r, (3, 2, 2, 6, 6)))


POOLS = [  # kernel, stride, padding, ceil_mode, count_include_pad
    ((2, 2), (2, 2), (0, 0), False, True),
    ((3, 3), (2, 2), (1, 1), False, True),
    ((3, 3), (2, 2), (1, 1), False, False),
    ((3, 2), (2, 2), (1, 0), True, True),
    ((3, 3), (2, 2), (1, 1), True, False),
    ((5, 5), (5, 5), (0, 0), False, True),
    ((2, 2), (2, 2), (1, 1), True, True),      # ceil mode: torch drops a last window starting in the right pad
    ((2, 2), (2, 2), (1, 1), True, False),
]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad", POOLS)
def test_avgpool2d(kernel, stride, padding, ceil_mode, count_include_pad):
    r = rng(1)
    g = build(TensorType((2, 5, 5)), [
        ("pool", "avgpool2d", ("x",), {"kernel": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil_mode,
                                       "count_include_pad": count_include_pad}, {}),
        ("lif", "lif", ("pool",), {"reset": "subtract"}, {k: np.array(v) for k, v in LIF_SCALAR.items()}),
    ], outputs=["lif", "pool"])
    check(g, r.normal(0.5, 1.0, (3, 2, 2, 5, 5)), bit_exact=True)


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((3, 2), (1, 2), (1, 0), (2, 1), False),
    ((2, 2), (2, 2), (0, 0), (1, 1), True),
    ((2, 2), (2, 2), (1, 1), (1, 1), True),    # torch drops a last window starting in the right pad
])
def test_maxpool2d(kernel, stride, padding, dilation, ceil_mode):
    r = rng(2)
    g = build(TensorType((2, 7, 5)), [
        ("pool", "maxpool2d", ("x",), {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation,
                                       "ceil_mode": ceil_mode}, {}),
    ])
    check(g, r.normal(size=(2, 3, 2, 7, 5)), bit_exact=True)


def test_dsmpa():
    r = rng(5)
    c = 4
    g = build(TensorType((c, 3, 4)), [
        ("lif", "lif", ("x",), {"reset": "subtract"}, {k: np.array(v) for k, v in LIF_SCALAR.items()}),
        ("lif.membrane", "lif", ("x",), {"reset": "subtract", "output": "membrane"},
         {k: np.array(v) for k, v in LIF_SCALAR.items()}),
        ("prev", "delay", ("lif",), {"steps": 1}, {}),
        ("att", "dsmpa", ("lif.membrane", "prev", "x"), {"eps": 1e-6},
         {"wq": r.normal(size=(c, c)) / 2, "wk": r.normal(size=(c, c)) / 2, "wv": r.normal(size=(c, c)) / 2,
          "gamma": r.normal(size=c)}),
        ("out", "lif", ("att",), {"reset": "zero"}, {k: np.array(v) for k, v in LIF_SCALAR.items()}),
    ], outputs=["out", "att"])
    check(g, r.normal(0.8, 1.0, (5, 2, c, 3, 4)))


# -- the model file: batch is symbolic, T is fixed; refusals -------------------------------------------
def test_batch_is_symbolic_and_time_fixed():
    r = rng(11)
    g = build(TensorType((3, 4, 4)), [("lif", "lif", ("x",), {"reset": "subtract"},
                                        {k: np.array(v) for k, v in LIF_PER_CHANNEL.items()})])
    model = export(g, 5)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_value == 5 and dims[1].dim_param == "B"
    for batch in (1, 7):
        x = dyadic(r, (5, batch, 3, 4, 4))
        got = run_model(model, {"x": x})["lif"]
        assert np.array_equal(got, run(g, x).values["lif"])
    with pytest.raises(BadInput, match="T=5"):
        check_model_against(model, g, dyadic(r, (4, 2, 3, 4, 4)), run(g, dyadic(r, (4, 2, 3, 4, 4))))


def test_bntt_steps_must_match():
    c = 2
    g = build(TensorType((c,)), [("bntt", "bntt", ("x",), {"eps": 1e-5},
                                  dict(gamma=np.ones((4, c)), beta=np.zeros((4, c)), mean=np.zeros((4, c)),
                                       var=np.ones((4, c))))])
    with pytest.raises(BadInput, match="node 'bntt'.*T=4"):
        export(g, 3)


@pytest.fixture
def op_without_onnx_form():
    """An op the IR and the interpreter know but the ONNX target does not (as a new op would be)."""
    name = "test_square_no_onnx"
    define(name, 1, lambda n, i: i[0], kernel=lambda ctx, node, p, x: x * x)
    yield name
    OPS.pop(name)


def test_refuses_op_without_onnx_form(op_without_onnx_form):
    g = build(TensorType((3,)), [("sq", op_without_onnx_form, ("x",), {}, {}),
                                 ("lif", "lif", ("sq",), {"reset": "zero"},
                                  {k: np.array(v) for k, v in LIF_SCALAR.items()})])
    with pytest.raises(UnsupportedOp) as e:
        export(g, 2)
    msg = e.value.message()
    assert "node 'sq'" in msg and op_without_onnx_form in msg and "no ONNX form" in msg


def test_float32_variant_runs_and_checks():
    r = rng(4)
    g = build(TensorType((2, 6, 6), "binary"), [
        ("conv", "conv2d", ("x",), {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
         {"weight": r.normal(size=(4, 2, 3, 3)), "bias": r.normal(size=4)}),
        ("pool", "avgpool2d", ("conv",), {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0),
                                          "ceil_mode": False, "count_include_pad": True}, {}),
        ("lif", "lif", ("pool",), {"reset": "subtract"}, {k: np.array(v) for k, v in LIF_SCALAR.items()}),
    ])
    model = export(g, 3, dtype="float32")
    assert op_types(model) >= {"Conv", "AveragePool"}
    x = spikes(r, (3, 2, 2, 6, 6))
    got = run_model(model, {"x": x.astype(np.float32)})["lif"]
    assert got.dtype == np.float32 and got.shape == (3, 2, 4, 3, 3)


# The frameworks' exact neurons (lif_snntorch ... li_norse) are tested in test_onnx_framework_neurons.py.


# Ops the IR defines that have no ONNX emitter (yet): exporting a graph that holds one is refused with
# UnsupportedOp naming the node. The attention ops of issue 8 get theirs with that change; sdna_pairwise
# (the SDNA pairwise neighbourhood attention, a dense host op) has none.
PENDING = {"sdna_pairwise", "loihi_lif", "loihi_shift", "xylo_lif"}  # loihi_* / xylo_*: for their chip's target (refused by name)


def test_every_ir_op_has_an_emitter_or_is_listed_pending():
    """A new IR op must get an ONNX emitter (emitters.py, framework_emitters.py) or be listed here."""
    import spikec.frontend  # noqa: F401  (the converters' ops, defined outside spikec.ops, register on import)
    from spikec.targets.onnx.emitters import EMITTERS
    from spikec.targets.coverage import internal_reason
    # lava_* ops are the Lava target's own integer reference and and_gate its product placement's AND neurons: never
    # part of a graph handed to ONNX
    missing = {op for op in OPS if op not in EMITTERS and not op.startswith("test_") and internal_reason(op) is None}
    assert missing <= PENDING, f"ops with no ONNX emitter: {sorted(missing - PENDING)}"
