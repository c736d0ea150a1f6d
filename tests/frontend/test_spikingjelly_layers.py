"""SpikingJelly's layer wrappers and containers (spikec.frontend.spikingjelly_layers): models of the tutorials'
shape traced whole and compared bit for bit with their own float64 forward, in both step modes; one test per
refusal."""
import numpy as np
import pytest
import torch
from torch import nn

from exact_neuron_helpers import assert_busy, convert_one, run_converted
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend import trace

SHAPE = (2, 8, 8)


@pytest.fixture(scope="module")
def sj():
    pytest.importorskip("spikingjelly.activation_based.neuron",
                        reason="SpikingJelly is an optional extra (pip install --no-deps spikingjelly loguru)")
    from spikingjelly.activation_based import functional, layer, neuron
    return functional, layer, neuron


def trained(net, seed, gain):
    """Inference statistics for every BatchNorm and louder Linear layers, so that every neuron fires and rests."""
    g = torch.Generator().manual_seed(seed)
    for m in net.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(c, generator=g) - 0.2)
        elif isinstance(m, nn.Linear):
            m.weight.data.mul_(gain)
    return net


def x_in(seed=0, steps=8):
    return np.random.default_rng(seed).normal(0.8, 2.0, size=(steps, 3, *SHAPE))


def assert_traced_exact(sj, net, x, shape=SHAPE):
    """trace() (multistep) and run the IR; equal to the model's own float64 forward after reset_net. Every neuron
    both fires and rests."""
    functional = sj[0]
    graph = trace(net, input_shape=shape, input_kind="real")
    got = run(graph, x)
    net.double()
    functional.reset_net(net)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    assert np.array_equal(got.outputs(graph)[0], want)
    neurons = [n for n in graph.nodes if n.op in ("lif", "lif_sj")]
    assert neurons
    for n in neurons:
        assert_busy(got.values[n.name])
    return graph


def tutorial(sj):
    functional, layer, neuron = sj
    torch.manual_seed(0)
    net = nn.Sequential(layer.Conv2d(2, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8), neuron.IFNode(),
                        layer.MaxPool2d(2), layer.Flatten(), layer.Linear(8 * 4 * 4, 10), neuron.LIFNode())
    functional.set_step_mode(net, "m")
    return trained(net, 0, 6.0)


def test_tutorial_model_in_multi_step_mode(sj):
    graph = assert_traced_exact(sj, tutorial(sj), x_in())
    assert [n.op for n in graph.nodes] == ["input", "conv2d", "batchnorm", "lif", "maxpool2d", "flatten", "linear",
                                           "lif_sj"]
    # the SpikingJelly classes' own converters, not the torch ones their MRO also reaches
    assert dict(graph.meta["converters"])["0"].endswith("spikingjelly_layers.sj_conv2d")


def test_tutorial_model_in_single_step_mode(sj):
    """step_mode 's', the model called once per time step: the wrappers delegate to the torch converters."""
    functional = sj[0]
    net = tutorial(sj)
    functional.set_step_mode(net, "s")
    net.eval()
    ctx, out = convert_one(net, SHAPE, "step")
    x = x_in(1)
    graph, (got,) = run_converted(ctx, [out], x)
    net.double()
    functional.reset_net(net)
    with torch.no_grad():
        want = torch.stack([net(x_t) for x_t in torch.from_numpy(x)]).numpy()
    assert np.array_equal(got, want)
    assert_busy(got)


def test_seq_to_ann_container(sj):
    _, layer, neuron = sj
    torch.manual_seed(1)
    net = nn.Sequential(layer.SeqToANNContainer(nn.Conv2d(2, 8, 3, padding=1), nn.BatchNorm2d(8)),
                        neuron.ParametricLIFNode(step_mode="m"),
                        layer.SeqToANNContainer(nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10)),
                        neuron.IFNode(v_reset=None, step_mode="m"))
    graph = assert_traced_exact(sj, trained(net, 1, 4.0), x_in(2))
    assert [n.op for n in graph.nodes if n.op != "input"] == ["conv2d", "batchnorm", "lif_sj", "avgpool2d", "flatten",
                                                              "linear", "lif"]


def test_multi_step_container(sj):
    """Single-step children called per time step; the neurons inside carry their state across the steps."""
    _, layer, neuron = sj
    torch.manual_seed(2)
    net = nn.Sequential(layer.SeqToANNContainer(layer.Conv2d(2, 8, 3, padding=1)),
                        layer.MultiStepContainer(layer.BatchNorm2d(8), neuron.LIFNode(tau=3.0, v_threshold=0.5),
                                                 layer.AvgPool2d(2), layer.Flatten(), layer.Linear(128, 10),
                                                 neuron.IFNode()))
    assert_traced_exact(sj, trained(net, 2, 8.0), x_in(3))


def test_step_mode_container(sj):
    _, layer, neuron = sj
    torch.manual_seed(4)
    net = nn.Sequential(layer.StepModeContainer(False, "m", nn.Conv2d(2, 8, 3, padding=1), nn.BatchNorm2d(8)),
                        neuron.IFNode(step_mode="m"),
                        layer.StepModeContainer(True, "m", nn.Flatten(), nn.Linear(8 * 8 * 8, 10), neuron.LIFNode()))
    assert_traced_exact(sj, trained(net, 4, 6.0), x_in(4))


def test_conv1d_batchnorm1d_pools_and_dropout(sj):
    """Conv1d runs as the Conv2d ATen computes it; Flatten(1, 2) in 'm' counts from the merged T*B tensor."""
    functional, layer, neuron = sj
    torch.manual_seed(3)
    net = nn.Sequential(layer.Conv2d(2, 6, 3, padding=1), layer.AvgPool2d(2), neuron.IFNode(v_threshold=0.5),
                        layer.AdaptiveAvgPool2d((2, 2)), layer.Dropout(0.3), layer.Flatten(1, 2),
                        layer.Conv1d(12, 5, 2, padding=1), layer.BatchNorm1d(5), neuron.LIFNode(decay_input=False),
                        layer.Flatten(), layer.Linear(15, 4), layer.BatchNorm1d(4), layer.Dropout2d(0.2),
                        neuron.IFNode(v_reset=0.2))
    functional.set_step_mode(net, "m")
    graph = assert_traced_exact(sj, trained(net, 3, 3.0), x_in(5))
    ops = [n.op for n in graph.nodes]
    assert ops[ops.index("flatten"):ops.index("batchnorm")] == ["flatten", "reshape", "conv2d", "reshape"]


@pytest.mark.parametrize("kw", [dict(stride=2, dilation=2, groups=2, padding=2), dict(padding="same", bias=False),
                                dict(kernel_size=1, stride=3)])
def test_conv1d_configurations(sj, kw):
    kw = {"kernel_size": 3, **kw}
    torch.manual_seed(5)
    conv = sj[1].Conv1d(4, 6, step_mode="m", **kw)
    ctx, out = convert_one(conv, (4, 11), "multistep")
    x = np.random.default_rng(6).normal(size=(3, 2, 4, 11))
    _, (got,) = run_converted(ctx, [out], x)
    with torch.no_grad():
        assert np.array_equal(got, conv.double()(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("mode", ["m", "s"])
def test_the_other_stateless_wrappers_run_their_torch_forward(sj, mode):
    """layer.MaxPool1d, AvgPool1d and AdaptiveAvgPool1d in a 1-D audio net (wrappers with no converter of their
    own): each its torch base module's forward, captured to ATen per step, bit for bit with SpikingJelly's own; in
    's' inside a SeqToANNContainer as the tutorials write it."""
    functional, layer, neuron = sj
    torch.manual_seed(7)
    pools = [layer.MaxPool1d(2), layer.AvgPool1d(3, stride=2, padding=1), layer.AdaptiveAvgPool1d(3)]
    body = [layer.Conv1d(2, 4, 3, padding=1), layer.BatchNorm1d(4), pools[0], layer.Conv1d(4, 4, 3), pools[1],
            pools[2]]
    if mode == "m":
        net = nn.Sequential(*body, neuron.IFNode(v_threshold=0.3), layer.Flatten(), layer.Linear(12, 3),
                            neuron.LIFNode(v_threshold=0.2))
        functional.set_step_mode(net, "m")
    else:
        net = nn.Sequential(layer.SeqToANNContainer(*body), neuron.IFNode(v_threshold=0.3, step_mode="m"),
                            layer.SeqToANNContainer(layer.Flatten(), layer.Linear(12, 3)),
                            neuron.LIFNode(v_threshold=0.2, step_mode="m"))
    x = np.random.default_rng(8).normal(0.5, 2.0, size=(6, 3, 2, 16))
    graph = assert_traced_exact(sj, trained(net, 7, 8.0), x, (2, 16))
    assert {"maxpool2d", "avgpool2d"} <= {n.op for n in graph.nodes}


@pytest.mark.parametrize("mode", ["m", "s"])
def test_voting_layer_is_the_linear_of_its_group_means(sj, mode):
    """DVSGestureNet's head (``layer.Linear(.., 100), PLIF, layer.VotingLayer(10)``): the linear of the means of each
    ten spikes, within float64 rounding of SpikingJelly's own avg_pool1d (the divisions differ in the last bit); a
    trailing partial group is dropped as avg_pool1d drops it."""
    functional, layer, neuron = sj
    torch.manual_seed(9)
    head = [layer.Flatten(), layer.Linear(2 * 8 * 8, 23), neuron.ParametricLIFNode(detach_reset=True)]
    if mode == "m":
        net = nn.Sequential(*head, layer.VotingLayer(5))
        functional.set_step_mode(net, "m")
    else:
        head[2].step_mode = "m"
        net = nn.Sequential(layer.SeqToANNContainer(head[0], head[1]), head[2],
                            layer.SeqToANNContainer(layer.VotingLayer(5)))
    graph = trace(trained(net, 9, 4.0), input_shape=SHAPE, input_kind="real")
    vote = graph.node(graph.outputs[0])
    assert vote.op == "linear" and vote.params["weight"].shape == (4, 23)
    x = x_in(9)
    got = run(graph, x)
    net.double()
    functional.reset_net(net)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got.outputs(graph)[0], want, rtol=1e-15, atol=1e-15)
    assert_busy(got.values[next(n.name for n in graph.nodes if n.op in ("lif", "lif_sj"))])


# -- refusals: one each --------------------------------------------------------------------
def refused(module, stepping, match, shape=SHAPE):
    with pytest.raises(UnsupportedOp, match=f"(?s){match}"):
        convert_one(module, shape, stepping)


def test_refuses_multi_step_wrapper_called_per_step(sj):
    refused(sj[1].Conv2d(2, 4, 3, step_mode="m"), "step", r"step_mode='m' takes dim 0 .* one time step")


def test_refuses_single_step_wrapper_on_the_sequence(sj):
    refused(sj[1].BatchNorm2d(2), "multistep", r"step_mode='s' applied to the \[T, B, ...\] sequence.*set_step_mode")


def test_refuses_seq_to_ann_container_called_per_step(sj):
    refused(sj[1].SeqToANNContainer(nn.Conv2d(2, 4, 3)), "step", "SeqToANNContainer takes dim 0")


def test_refuses_multi_step_container_called_per_step(sj):
    refused(sj[1].MultiStepContainer(nn.Conv2d(2, 4, 3)), "step", "MultiStepContainer takes dim 0")


def test_refuses_a_neuron_inside_seq_to_ann_container(sj):
    refused(sj[1].SeqToANNContainer(nn.Flatten(), sj[2].IFNode()), "multistep", r"T\*B as time")


def test_refuses_t_last_container(sj):
    refused(sj[1].TLastSeqToANNContainer(nn.Flatten()), "multistep", r"T-last.*\[B, \.\.\., T\]")


def test_refuses_wrapper_subclass(sj):
    refused(sj[1].WSConv2d(2, 4, 3, step_mode="m"), "multistep", "subclasses of layer.Conv2d")
