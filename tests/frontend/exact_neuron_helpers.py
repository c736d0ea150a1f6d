"""What the snnTorch and SpikingJelly converter tests share: a dense model around one neuron, and a bit-exact
comparison of its trace against the float64 model."""
import zlib

import numpy as np
import torch
from torch import nn

import spikec.nn as snc
from spikec.core.interpreter import run
from spikec.frontend import trace

N_IN, HIDDEN, N_OUT = 6, 12, 4


def dense(neuron_module):
    torch.manual_seed(0)
    return nn.Sequential(snc.TimeDistributed(nn.Linear(N_IN, HIDDEN)), neuron_module,
                         snc.TimeDistributed(nn.Linear(HIDDEN, N_OUT)))


def compare(model, x, shape=(N_IN,), reset=lambda: None):
    """Trace, run the IR and the float64 model on ``x``; outputs must be identical. Returns the trace."""
    graph = trace(model, input_shape=shape, input_kind="real")
    got = run(graph, x)
    model.double()
    reset()
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    assert np.array_equal(got.outputs(graph)[0], want)
    return graph, got


def neuron_spikes(graph, got, ops=("lif", "lif_snntorch", "lif_sj")):
    (node,) = [n for n in graph.nodes if n.op in ops]
    return node, got.values[node.name]


def assert_busy(spikes):
    """Many spikes and many silences, so that firing and reset are both exercised."""
    assert 0.05 < spikes.mean() < 0.95, spikes.mean()


def steps_for(*case):
    """A number of steps in 1..16 that differs between cases but not between runs."""
    return 1 + zlib.crc32(repr(case).encode()) % 16


def inputs(seed, steps, scale=2.0, shape=(N_IN,)):
    rng = np.random.default_rng(seed)
    return rng.normal(0.3, scale, size=(steps, 3, *shape))


def convert_one(module, shape, stepping="step", kind="real"):
    """Convert one neuron ``module`` alone, as the tracer would call it; returns ``(ctx, returned pytree)``.

    ``stepping="step"``: the module is called once per time step on ``[B, *shape]`` (torch sees one leading
    dimension); ``"multistep"``: once on ``[T, B, *shape]``.
    """
    from spikec.ir.graph import Node, TensorType
    from spikec.frontend.registry import ConvertContext
    ctx = ConvertContext(per_step=stepping == "step", stepping=stepping)
    node = Node("input", "input", (), TensorType(tuple(shape), kind))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    return ctx, ctx.convert_module(module, "neuron", "input")


def run_converted(ctx, outputs, x):
    """Verify the converted nodes as a graph with ``outputs`` (node names) and run it on ``x`` [T, B, ...]."""
    from spikec.ir.graph import Graph
    from spikec.core.verify import verify
    graph = verify(Graph(tuple(ctx.nodes), tuple(outputs), {}), "test")
    return graph, [np.asarray(v) for v in run(graph, x).outputs(graph)]


def run_steps(module, x):
    """Call a step module (``out, state = module(x_t, state)``) over ``x [T, B, ...]`` from ``state=None`` in float64;
    returns ``(outputs, states)``: the outputs stacked ``[T, B, ...]`` and the state stacked leaf by leaf."""
    from torch.utils._pytree import tree_flatten, tree_unflatten
    state, outs = None, []
    with torch.no_grad():
        for x_t in torch.from_numpy(x):
            out, state = module(x_t, state)
            flat, spec = tree_flatten((out, state))
            outs.append(flat)
    stacked = [None if v[0] is None else torch.stack(v).numpy() for v in zip(*outs)]
    return tree_unflatten(stacked, spec)


def assert_returns_exact(ctx, returned, x, want):
    """The nodes a converter returned (a pytree of node names and ``None``) run on ``x`` equal ``want`` (the same
    pytree of arrays) bit for bit; a ``None`` leaf is not compared. Returns the arrays run, by node name."""
    from torch.utils._pytree import tree_leaves
    names, wanted = tree_leaves(returned), tree_leaves(want)
    assert len(names) == len(wanted), (returned, want)
    pairs = [(n, w) for n, w in zip(names, wanted) if n is not None]
    _, got = run_converted(ctx, [n for n, _ in pairs], x)
    for (name, w), g in zip(pairs, got):
        assert np.array_equal(g, np.asarray(w)), f"{name}: max |diff| {np.abs(g - np.asarray(w)).max()}"
    return {n: g for (n, _), g in zip(pairs, got)}
