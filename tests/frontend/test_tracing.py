"""The torch.fx frontend (spikec.frontend.tracing and .registry): refusals name what and where and how to fix;
registry; names; metadata."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import BadInput, ShapeError, UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend import CONVERTERS, register_converter, trace


class Chain(nn.Module):
    def __init__(self, *layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Block(nn.Module):
    """A plain container (not a leaf): fx traces through it, so its children get dotted paths."""

    def __init__(self, act):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


class Outer(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.body = Block(act)
        self.lif = snn.LIF()

    def forward(self, x):
        return self.lif(self.body(x))


def outputs_equal(model, graph, x):
    with torch.no_grad():
        ref = model.double()(torch.tensor(x)).numpy()
    return np.array_equal(run(graph, x).outputs(graph)[0], ref)


# -- refusals --------------------------------------------------------------------------------
def test_unknown_module_names_path_class_and_remedy():
    with pytest.raises(UnsupportedOp) as e:
        trace(Outer(nn.ELU()), (4,))
    msg = str(e.value)
    assert "'body.act'" in msg
    assert "torch.nn.modules.activation.ELU" in msg
    assert "register_converter" in msg
    assert e.value.exit_code == 2


def test_unknown_module_inside_time_distributed_names_its_path():
    model = Chain(snn.TimeDistributed(nn.Conv2d(1, 2, 3), nn.ELU()))
    with pytest.raises(UnsupportedOp) as e:
        trace(model, (1, 5, 5))
    msg = str(e.value)
    assert "'layers.0.1'" in msg and "ELU" in msg and "register_converter" in msg


class Sigmoidal(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return torch.atan(self.fc(x))


class MethodCall(nn.Module):
    def forward(self, x):
        return x.atan()


def test_unknown_function_is_named():
    with pytest.raises(UnsupportedOp) as e:
        trace(Sigmoidal(), (3,))
    msg = str(e.value)
    assert "atan" in msg and "function" in msg and "register_function" in msg


def test_unknown_method_is_named():
    with pytest.raises(UnsupportedOp, match="method atan"):
        trace(MethodCall(), (3,))


class Power(nn.Module):
    def forward(self, x):
        return x ** 1.5


def test_unsupported_operator_is_refused_not_dropped():
    with pytest.raises(UnsupportedOp, match="pow"):
        trace(Power(), (3,))


@pytest.mark.parametrize("layer", [nn.BatchNorm2d(2), nn.Conv2d(2, 2, 3), nn.MaxPool2d(2), nn.AvgPool2d(2)])
def test_per_step_module_at_top_level_is_refused(layer):
    with pytest.raises(UnsupportedOp) as e:
        trace(Chain(layer), (2, 6, 6))
    msg = str(e.value)
    assert "TimeDistributed" in msg and "remedy" in msg
    assert "'layers.0'" in msg and type(layer).__qualname__ in msg


def test_batchnorm_inside_time_distributed_is_accepted():
    graph = trace(Chain(snn.TimeDistributed(nn.BatchNorm2d(2))), (2, 6, 6))
    assert [n.op for n in graph.nodes] == ["input", "batchnorm"]


def test_linear_shape_mismatch_names_the_node():
    model = Chain(nn.Linear(5, 3), snn.LIF())
    with pytest.raises(ShapeError) as e:
        trace(model, (4,))
    msg = str(e.value)
    assert "'layers.0'" in msg and "linear" in msg and "5 input features" in msg


def test_conv_channel_mismatch_names_the_node():
    model = Outer(nn.ReLU())
    model.body = snn.TimeDistributed(nn.Conv2d(3, 4, 3))
    with pytest.raises(ShapeError, match="'body.0'"):
        trace(model, (2, 6, 6))


def test_kernel_larger_than_input():
    with pytest.raises(ShapeError, match="does not fit"):
        trace(Chain(snn.TimeDistributed(nn.Conv2d(1, 1, 5))), (1, 3, 3))


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return x + y


def test_two_input_model_is_refused():
    with pytest.raises(BadInput, match="more than one input"):
        trace(TwoInputs(), (3,))


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return x * 2


def test_untraceable_control_flow_is_unsupported_op():
    with pytest.raises(UnsupportedOp, match="torch.fx cannot trace"):
        trace(DataDependent(), (3,))


# -- the converter registry ------------------------------------------------------------------
class Rectifier(nn.Module):
    """Computes ReLU in a way the frontend cannot lower (aten.maximum has no IR lowering)."""

    def forward(self, x):
        return torch.maximum(x, torch.zeros_like(x))


class LeakyRectifier(Rectifier):
    pass


def rectifier_to_relu(ctx, module, name, x):
    return ctx.emit(name, "relu", [x], scope=name)


def test_register_converter_for_custom_module():
    model = Chain(nn.Linear(3, 4), Rectifier(), snn.LIF(threshold=0.25))
    with pytest.raises(UnsupportedOp, match="aten.maximum"):
        trace(model, (3,))
    register_converter(Rectifier, rectifier_to_relu)
    try:
        graph = trace(model, (3,), input_kind="real")
        assert [n.op for n in graph.nodes] == ["input", "linear", "relu", "lif"]
        assert graph.node("layers.1").scope == "layers.1"
        converters = dict(graph.meta["converters"])
        assert converters["layers.1"].endswith("Rectifier -> " + __name__ + ".rectifier_to_relu")
        x = np.random.default_rng(0).normal(size=(5, 2, 3))
        assert outputs_equal(model, graph, x)
        # subclasses use their base class's converter
        sub = trace(Chain(nn.Linear(3, 4), LeakyRectifier()), (3,))
        assert [n.op for n in sub.nodes] == ["input", "linear", "relu"]
    finally:
        CONVERTERS.pop(Rectifier, None)
    with pytest.raises(UnsupportedOp):
        trace(model, (3,))


# -- names, no-op modules, metadata ----------------------------------------------------------
class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3))
        self.lif = snn.LIF()
        self.rep = snn.RepConv(3, 3)
        self.lif2 = snn.LIF()
        self.drop = nn.Dropout(0.5)
        self.ident = nn.Identity()
        self.head = snn.TimeDistributed(nn.Flatten(), nn.Dropout(0.2), nn.Linear(3 * 4 * 4, 2))

    def forward(self, x):
        s = self.lif(self.conv(x))
        y = self.lif2(self.rep(s)) + s
        return self.head(self.ident(self.drop(y * 0.5)))


def test_node_names_are_deterministic_and_follow_module_paths():
    torch.manual_seed(0)
    a = trace(Named(), (2, 4, 4))
    b = trace(Named(), (2, 4, 4))
    c = trace(a_model := Named(), (2, 4, 4))
    d = trace(a_model, (2, 4, 4))
    names = [n.name for n in a.nodes]
    assert names == [n.name for n in b.nodes] == [n.name for n in c.nodes] == [n.name for n in d.nodes]
    assert a.outputs == b.outputs
    assert len(set(names)) == len(names)
    assert {"input", "conv.0", "conv.1", "lif", "rep.conv3x3.0", "rep.identity", "rep.avgpool.0", "lif2",
            "head.0", "head.2"} <= set(names)


def test_dropout_and_identity_produce_no_node():
    graph = trace(Named(), (2, 4, 4))
    assert not {"drop", "ident", "head.1"} & {n.name for n in graph.nodes}
    assert {n.op for n in graph.nodes} == {"input", "conv2d", "batchnorm", "lif", "add", "avgpool2d", "scale",
                                           "flatten", "linear"}
    model = Chain(nn.Linear(3, 3), nn.Dropout(0.9), nn.Identity(), snn.LIF())
    model.train()
    graph = trace(model, (3,))
    assert [n.op for n in graph.nodes] == ["input", "linear", "lif"]
    assert not model.training  # trace puts the model in eval mode (dropout off)


def test_meta_lists_converter_of_each_module():
    graph = trace(Named(), (2, 4, 4))
    converters = dict(graph.meta["converters"])
    assert {"conv", "lif", "rep", "lif2", "drop", "ident", "head"} <= set(converters)
    # children converted inside TimeDistributed / RepConv are listed too
    assert converters["conv.0"].endswith("Conv2d -> spikec.frontend.torch_modules.conv2d")
    assert all(name.split(".")[0] in {"conv", "lif", "rep", "lif2", "drop", "ident", "head"} for name in converters)
    # each entry opens with the IR ops the module became
    assert converters["lif"] == "[lif] spikec.nn.neurons.LIF -> spikec.frontend.torch_modules.lif"
    assert converters["rep"] == ("[add, avgpool2d, batchnorm, conv2d] spikec.nn.structural.RepConv -> "
                                 "spikec.frontend.torch_modules.repconv")
    assert converters["drop"] == "torch.nn.modules.dropout.Dropout -> spikec.frontend.torch_modules.identity"  # no node
    assert converters["drop"].endswith("Dropout -> spikec.frontend.torch_modules.identity")
    assert converters["ident"].endswith("Identity -> spikec.frontend.torch_modules.identity")
    assert converters["conv"].endswith("TimeDistributed -> spikec.frontend.torch_modules.time_distributed")
    assert graph.meta["source"] == "Named"


def test_traced_named_model_matches_torch():
    torch.manual_seed(1)
    model = Named()
    graph = trace(model, (2, 4, 4))
    x = (np.random.default_rng(0).random((4, 2, 2, 4, 4)) < 0.5).astype(np.float64)
    assert outputs_equal(model, graph, x)


def test_scalar_ops_become_scale_nodes():
    class Affine(nn.Module):
        def forward(self, x):
            return 3.0 + (x * 2)

    graph = trace(Affine(), (3,))
    scales = [dict(n.attrs) for n in graph.nodes if n.op == "scale"]
    assert scales == [{"a": 2.0, "b": 0.0}, {"a": 1.0, "b": 3.0}]
    assert outputs_equal(Affine(), graph, np.random.default_rng(0).normal(size=(2, 2, 3)))


def test_input_kind_and_ceiling_are_recorded():
    graph = trace(Chain(snn.LIF()), (3,), input_kind="integer", ceiling=4)
    assert graph.node("input").type.kind == "integer" and graph.node("input").type.ceiling == 4
    assert trace(Chain(snn.LIF()), (3,)).node("input").type.kind == "binary"


# -- known gaps (these tests fail until the frontend is fixed; see the report) ---------------
def test_root_module_with_a_converter_can_be_traced():
    """A model that *is* a registered module (e.g. a bare TimeDistributed or LIF) should trace like a wrapped one."""
    torch.manual_seed(0)
    model = snn.TimeDistributed(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU())
    graph = trace(model, (1, 5, 5))
    assert [n.op for n in graph.nodes] == ["input", "conv2d", "relu"]
    x = (np.random.default_rng(0).random((3, 2, 1, 5, 5)) < 0.5).astype(np.float64)
    assert outputs_equal(model, graph, x)


@pytest.mark.parametrize("make", [lambda: snn.Delay(1), lambda: snn.LIF(beta=1.0, threshold=1.0),
                                  lambda: snn.IntFire(threshold=1.0, max_spikes=2)],
                         ids=["Delay", "LIF", "IntFire"])
def test_stateful_module_inside_time_distributed_is_not_miscompiled(make):
    """Inside TimeDistributed torch runs a multi-step module on [T*B, C, H, W], i.e. over T*B "steps" and
    C "samples"; the IR node runs over T steps per sample. The trace must refuse it, or agree with torch."""
    conv = nn.Conv2d(1, 1, 1, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0)  # identity: the neuron sees the input itself
    model = Chain(snn.TimeDistributed(conv, make()))
    x = np.full((4, 3, 1, 2, 2), 0.625)  # an IF neuron fires on the 2nd step of *its own* sequence
    try:
        graph = trace(model, (1, 2, 2), input_kind="real")
    except UnsupportedOp as e:
        assert "TimeDistributed" in str(e)
        return
    assert outputs_equal(model, graph, x), "traced graph silently disagrees with the torch model"
