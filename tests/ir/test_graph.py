"""IR invariants: bit-exact save/load, immutability, the verifier's diagnostics, and kind inference."""
import dataclasses
import json

import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import IRError, ShapeError
from spikec.frontend import trace
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import OPS, infer_type
from spikec.core.serialize import load_graph, save_graph
from spikec.core.verify import problems, verify

BIN = TensorType((2, 4, 4), "binary")


def conv_attrs(stride=1, padding=1, groups=1):
    return {"stride": (stride, stride), "padding": (padding, padding), "dilation": (1, 1), "groups": groups}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = snn.TimeDistributed(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4))
        self.lif = snn.LIF(beta=[0.5, 0.6, 0.7, 0.8], threshold=0.75, reset="zero", v_reset=0.125)
        self.ws = snn.WindowSum(3, 2)
        self.fire = snn.IntFire(threshold=[1.0, 2.0, 3.0, 4.0], max_spikes=3, rounding="floor")
        self.rep = snn.RepConv(4, 4)
        self.pool = snn.TimeDistributed(nn.AvgPool2d(2, count_include_pad=False), nn.Flatten())
        self.fc = nn.Linear(16, 3)
        self.csilif = snn.CSiLIF(3)

    def forward(self, x):
        s = self.lif(self.conv(x))
        y = self.fire(self.ws(s)) + s
        return self.csilif(self.fc(self.pool(self.rep(y * s)))), y


def traced():
    torch.manual_seed(0)
    model = Net()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
    return trace(model, (2, 4, 4)), model


def awkward_graph():
    """Values that a lossy format would change: -0.0, subnormals, 1/3, huge int64, 0-d params, float attrs."""
    w = np.array([[-0.0, 5e-324, 1 / 3, -1e308], [np.pi, -np.e, 2.0 ** -1074, 1e-300]])
    nodes = [Node("in.put", "input", (), TensorType((4,), "integer", 3)),
             Node("fc", "linear", ("in.put",), TensorType((2,)), {}, {"weight": w, "bias": np.array([0.1, -0.0])},
                  scope="a.b"),
             Node("fi", "intfire", ("fc",), TensorType((2,), "integer", 5), {"max_spikes": 5, "rounding": "round"},
                  {"beta": np.float64(0.1), "alpha": np.array([0.7, 1 / 7]), "threshold": 2 ** -20}),
             Node("big", "linear", ("fi",), TensorType((1,)), {},
                  {"weight": np.array([[2 ** 62 + 1, -(2 ** 63)]], dtype=np.int64)}),
             Node("sc", "scale", ("fc",), TensorType((2,)), {"a": 0.1, "b": -1e-17})]
    return Graph(tuple(nodes), ("big", "sc"), {"source": "hand", "note": ("x", 1, 0.5, None, True),
                                               "nested": (("a", "b"),)})


def assert_same_graph(a: Graph, b: Graph):
    assert a.outputs == b.outputs
    assert dict(a.meta) == dict(b.meta)
    assert [n.name for n in a.nodes] == [n.name for n in b.nodes]
    for x, y in zip(a.nodes, b.nodes):
        assert (x.name, x.op, x.inputs, x.type, x.scope) == (y.name, y.op, y.inputs, y.type, y.scope)
        assert dict(x.attrs) == dict(y.attrs)
        assert {k: type(v) for k, v in x.attrs.items()} == {k: type(v) for k, v in y.attrs.items()}
        assert sorted(x.params) == sorted(y.params)
        for k in x.params:
            p, q = x.params[k], y.params[k]
            assert p.dtype == q.dtype and p.shape == q.shape, (x.name, k)
            assert p.tobytes() == q.tobytes(), (x.name, k)  # bit-exact, including -0.0 and subnormals


# -- serialization ---------------------------------------------------------------------------
def test_round_trip_traced_graph(tmp_path):
    graph, _ = traced()
    save_graph(graph, tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"graph.json", "weights.npz"}
    loaded = load_graph(tmp_path)
    assert_same_graph(graph, loaded)
    x = (np.random.default_rng(0).random((3, 2, 2, 4, 4)) < 0.5).astype(float)
    for a, b in zip(run(graph, x).outputs(graph), run(loaded, x).outputs(loaded)):
        assert np.array_equal(a, b)


def test_round_trip_awkward_values(tmp_path):
    graph = verify(awkward_graph())
    save_graph(graph, tmp_path)
    loaded = load_graph(tmp_path)
    assert_same_graph(graph, loaded)
    assert loaded.node("big").params["weight"].dtype == np.int64
    assert loaded.node("fi").params["beta"].shape == ()
    assert np.signbit(loaded.node("fc").params["weight"][0, 0])


def test_round_trip_is_stable(tmp_path):
    graph, _ = traced()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    save_graph(graph, tmp_path / "a")
    save_graph(load_graph(tmp_path / "a"), tmp_path / "b")
    assert (tmp_path / "a" / "graph.json").read_text() == (tmp_path / "b" / "graph.json").read_text()


def test_load_errors_are_ir_errors(tmp_path):
    with pytest.raises(IRError, match="cannot load"):
        load_graph(tmp_path)
    graph, _ = traced()
    save_graph(graph, tmp_path)
    doc = json.loads((tmp_path / "graph.json").read_text())
    doc["version"] = 99
    (tmp_path / "graph.json").write_text(json.dumps(doc))
    with pytest.raises(IRError, match="version"):
        load_graph(tmp_path)


def test_loaded_graph_is_verified(tmp_path):
    graph, _ = traced()
    save_graph(graph, tmp_path)
    doc = json.loads((tmp_path / "graph.json").read_text())
    lif = next(n for n in doc["nodes"] if n["op"] == "lif")
    lif["type"]["kind"] = "real"
    (tmp_path / "graph.json").write_text(json.dumps(doc))
    with pytest.raises(IRError, match="after loading"):
        load_graph(tmp_path)


# -- immutability ----------------------------------------------------------------------------
def test_params_are_read_only_copies():
    src = np.ones((2, 3))
    node = Node("fc", "linear", ("x",), TensorType((2,)), {}, {"weight": src})
    src[0, 0] = 7.0  # the caller's array is not shared
    w = node.params["weight"]
    assert w[0, 0] == 1.0 and w.dtype == np.float64
    assert not w.flags.writeable
    with pytest.raises(ValueError):
        w[0, 0] = 2.0
    with pytest.raises(TypeError):
        node.params["weight"] = np.zeros((2, 3))
    with pytest.raises(TypeError):
        del node.params["weight"]


def test_params_are_normalized_to_float64_or_int64():
    node = Node("fc", "linear", ("x",), TensorType((2,)), {},
                {"weight": np.ones((2, 3), dtype=np.float32), "bias": np.array([1, 2], dtype=np.int8)})
    assert node.params["weight"].dtype == np.float64 and node.params["bias"].dtype == np.int64
    with pytest.raises(IRError, match="dtype"):
        Node("fc", "linear", ("x",), TensorType((2,)), {}, {"weight": np.array(["a"])})


def test_attrs_and_meta_are_immutable():
    node = Node("p", "maxpool2d", ("x",), TensorType((2, 2, 2)),
                {"kernel": [2, 2], "stride": [2, 2], "padding": [0, 0], "ceil_mode": False})
    assert node.attrs["kernel"] == (2, 2) and isinstance(node.attrs["kernel"], tuple)
    with pytest.raises(TypeError):
        node.attrs["kernel"] = (3, 3)
    graph = Graph((Node("x", "input", (), BIN),), ("x",), {"k": [1, 2]})
    assert graph.meta["k"] == (1, 2)
    with pytest.raises(TypeError):
        graph.meta["k"] = 3
    with pytest.raises(IRError, match="JSON"):
        Node("p", "relu", ("x",), BIN, {"bad": object()})


def test_node_and_graph_are_frozen():
    node = Node("x", "input", (), BIN)
    for field, value in (("name", "y"), ("op", "relu"), ("inputs", ("z",)), ("type", BIN), ("params", {})):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(node, field, value)
    graph = Graph((node,), ("x",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        graph.nodes = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        BIN.kind = "real"
    assert isinstance(node.inputs, tuple) and isinstance(graph.nodes, tuple)


def test_with_makes_a_new_node():
    node = Node("fc", "linear", ("x",), TensorType((2,)), {}, {"weight": np.ones((2, 3))})
    other = node.with_(name="fc2", params={"weight": np.zeros((2, 3))})
    assert node.name == "fc" and node.params["weight"].sum() == 6
    assert other.name == "fc2" and other.params["weight"].sum() == 0 and not other.params["weight"].flags.writeable


def test_tensor_type_validation():
    with pytest.raises(IRError):
        TensorType((2,), "integer")          # integer needs a ceiling
    with pytest.raises(IRError):
        TensorType((2,), "binary", 3)        # others have none
    with pytest.raises(IRError):
        TensorType((2,), "spiky")
    with pytest.raises(IRError):
        TensorType((0, 2))
    with pytest.raises(IRError):
        TensorType((2,), "integer", 0)


# -- verifier --------------------------------------------------------------------------------
def verify_message(nodes, outputs):
    with pytest.raises(IRError) as e:
        verify(Graph(tuple(nodes), tuple(outputs)))
    return str(e.value)


def test_verifier_accepts_traced_graph():
    graph, _ = traced()
    assert problems(graph) == []
    assert verify(graph) is graph


def test_type_mismatch_names_the_edge():
    msg = verify_message([Node("src", "input", (), TensorType((4,), "real")),
                          Node("dst", "relu", ("src",), TensorType((4,), "binary"))], ["dst"])
    assert "edge" in msg and "'src'" in msg and "-> 'dst'" in msg
    assert "binary[4]" in msg and "real[4]" in msg


def test_shape_mismatch_on_an_edge():
    msg = verify_message([Node("src", "input", (), TensorType((3,), "binary")),
                          Node("fc", "linear", ("src",), TensorType((2,)), {}, {"weight": np.ones((2, 4))})], ["fc"])
    assert "'fc'" in msg and "4 input features" in msg


def test_missing_input_node():
    msg = verify_message([Node("a", "input", (), BIN), Node("b", "relu", ("ghost",), BIN)], ["b"])
    assert "edge 'ghost' -> 'b'" in msg


def test_input_after_consumer_is_a_cycle_or_missing():
    msg = verify_message([Node("b", "relu", ("a",), BIN), Node("a", "input", (), BIN)], ["b"])
    assert "'a' -> 'b'" in msg


def test_duplicate_names():
    with pytest.raises(IRError, match="two nodes are named 'a'"):
        Graph((Node("a", "input", (), BIN), Node("a", "relu", ("a",), BIN)), ("a",))


def test_nan_and_inf_in_params():
    w = np.ones((2, 3))
    w[1, 2] = np.nan
    msg = verify_message([Node("x", "input", (), TensorType((3,), "binary")),
                          Node("fc", "linear", ("x",), TensorType((2,)), {}, {"weight": w, "bias": [np.inf, 0]})],
                         ["fc"])
    assert "'fc'" in msg and "'weight'" in msg and "'bias'" in msg and "NaN" in msg


def test_wrong_arity():
    msg = verify_message([Node("x", "input", (), BIN), Node("s", "add", ("x",), BIN)], ["s"])
    assert "'s'" in msg and "add takes 2 inputs, has 1" in msg
    msg = verify_message([Node("x", "input", (), BIN), Node("r", "relu", ("x", "x"), BIN)], ["r"])
    assert "relu takes 1 inputs, has 2" in msg


def test_unknown_op():
    msg = verify_message([Node("x", "input", (), BIN), Node("q", "teleport", ("x",), BIN)], ["q"])
    assert "'q'" in msg and "unknown op 'teleport'" in msg


def test_missing_and_unexpected_params():
    msg = verify_message([Node("x", "input", (), TensorType((3,), "binary")),
                          Node("fc", "linear", ("x",), TensorType((2,)), {}, {"bias": np.ones(2),
                                                                               "gain": np.ones(2)})], ["fc"])
    assert "missing parameter 'weight'" in msg and "unexpected parameter 'gain'" in msg


def test_bad_outputs_and_names():
    msg = verify_message([Node("x", "input", (), BIN)], ["nowhere"])
    assert "graph output 'nowhere' is not a node" in msg
    msg = verify_message([Node("x", "input", (), BIN)], [])
    assert "no outputs" in msg
    msg = verify_message([Node("x/y", "input", (), BIN)], ["x/y"])
    assert "name must be" in msg


def test_verifier_reports_every_problem_at_once():
    msg = verify_message([Node("x", "input", (), BIN), Node("q", "teleport", ("x",), BIN),
                          Node("s", "add", ("x",), BIN)], ["q", "zz"])
    assert "teleport" in msg and "add takes 2" in msg and "'zz'" in msg


def test_malformed_attrs_are_reported_not_raised():
    msg = verify_message([Node("x", "input", (), BIN), Node("p", "maxpool2d", ("x",), BIN, {"kernel": (2, 2)})],
                         ["p"])
    assert "'p'" in msg and "malformed" in msg


def test_per_channel_param_shape_checked():
    msg = verify_message([Node("x", "input", (), BIN),
                          Node("n", "lif", ("x",), BIN, {"reset": "subtract"},
                               {"beta": np.ones(3), "alpha": 1.0, "bias": 0.0, "threshold": 1.0,
                                "v_reset": 0.0})], ["n"])
    assert "'n'" in msg and "beta" in msg and "(3,)" in msg


# -- kind inference --------------------------------------------------------------------------
def infer(op, in_types, attrs=None, params=None):
    node = Node("n", op, tuple(f"i{k}" for k in range(len(in_types))), TensorType((1,)), attrs or {}, params or {})
    return infer_type(node, list(in_types))


INT3 = TensorType((2, 4, 4), "integer", 3)
REAL = TensorType((2, 4, 4))


@pytest.mark.parametrize("a, b, expected", [
    (BIN, BIN, TensorType((2, 4, 4), "integer", 2)),
    (INT3, BIN, TensorType((2, 4, 4), "integer", 4)),
    (INT3, INT3, TensorType((2, 4, 4), "integer", 6)),
    (BIN, REAL, REAL),
    (REAL, REAL, REAL),
])
def test_add_kinds(a, b, expected):
    assert infer("add", [a, b]) == expected


@pytest.mark.parametrize("a, b, expected", [
    (BIN, BIN, BIN),
    (INT3, BIN, TensorType((2, 4, 4), "integer", 3)),
    (INT3, INT3, TensorType((2, 4, 4), "integer", 9)),
    (REAL, BIN, REAL),
])
def test_mul_kinds(a, b, expected):
    assert infer("mul", [a, b]) == expected


def test_elementwise_refuses_broadcasting():
    with pytest.raises(ShapeError, match="identical shapes"):
        infer("add", [BIN, TensorType((1, 4, 4), "binary")])


@pytest.mark.parametrize("kernel, dilation, t, expected", [
    (3, 1, BIN, TensorType((2, 4, 4), "integer", 9)),
    (5, 2, BIN, TensorType((2, 4, 4), "integer", 25)),
    (3, 1, INT3, TensorType((2, 4, 4), "integer", 27)),
    (3, 1, REAL, REAL),
])
def test_windowsum_kinds(kernel, dilation, t, expected):
    assert infer("windowsum", [t], {"kernel": kernel, "dilation": dilation}) == expected


POOL = {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1), "ceil_mode": False}


@pytest.mark.parametrize("t", [BIN, INT3, REAL])
def test_maxpool_keeps_kind_avgpool_is_real(t):
    out = infer("maxpool2d", [t], POOL)
    assert (out.shape, out.kind, out.ceiling) == ((2, 2, 2), t.kind, t.ceiling)
    avg = infer("avgpool2d", [t], dict(POOL, count_include_pad=True))
    assert avg == TensorType((2, 2, 2), "real")


@pytest.mark.parametrize("t", [BIN, INT3, REAL])
def test_conv_and_linear_give_real(t):
    assert infer("conv2d", [t], conv_attrs(), {"weight": np.ones((5, 2, 3, 3))}) == TensorType((5, 4, 4))
    assert infer("conv2d", [t], conv_attrs(2, 1), {"weight": np.ones((5, 2, 3, 3))}) == TensorType((5, 2, 2))
    assert infer("linear", [t], {}, {"weight": np.ones((7, 4))}) == TensorType((2, 4, 7))


def test_neurons_give_spikes_and_flatten_relu_delay_keep_kind():
    params = {"beta": 1.0, "alpha": 1.0, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0}
    assert infer("lif", [REAL], {"reset": "zero"}, params) == TensorType((2, 4, 4), "binary")
    assert infer("intfire", [REAL], {"max_spikes": 4, "rounding": "floor"},
                 {"beta": 1.0, "alpha": 1.0, "threshold": 1.0}) == TensorType((2, 4, 4), "integer", 4)
    assert infer("flatten", [INT3], {"start": 0, "end": -1}) == TensorType((32,), "integer", 3)
    assert infer("relu", [BIN]) == BIN
    assert infer("delay", [INT3], {"steps": 2}) == INT3
    assert infer("scale", [BIN], {"a": 2.0, "b": 0.0}) == REAL


def test_every_op_has_a_definition_with_arity():
    for name in ("conv2d", "linear", "batchnorm", "bntt", "tdm", "scale", "avgpool2d", "maxpool2d", "flatten",
                 "relu", "delay", "windowsum", "add", "mul", "lif", "intfire", "silif", "csilif", "input"):
        assert name in OPS
    assert OPS["add"].arity == 2 and OPS["input"].arity == 0 and OPS["lif"].arity == 1
    assert OPS["conv2d"].synaptic and OPS["windowsum"].synaptic and OPS["lif"].stateful


def test_traced_kinds():
    graph, _ = traced()
    kinds = {n.name: n.type for n in graph.nodes}
    assert kinds["lif"].kind == "binary"
    assert (kinds["ws"].kind, kinds["ws"].ceiling) == ("integer", 9)
    assert (kinds["fire"].kind, kinds["fire"].ceiling) == ("integer", 3)
    add = next(n for n in graph.nodes if n.op == "add" and "fire" in n.inputs)
    assert (add.type.kind, add.type.ceiling) == ("integer", 4)
    mul = next(n for n in graph.nodes if n.op == "mul")
    assert (mul.type.kind, mul.type.ceiling) == ("integer", 4)
    assert all(n.type.kind == "real" for n in graph.nodes if n.op in ("conv2d", "batchnorm", "linear"))
