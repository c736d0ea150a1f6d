"""reassociate_attention (passes.md, "Softmax-free attention reassociation"): ``(Q K^T) V == Q (K^T V)`` bit for bit
on spike tensors, the order chosen by the cost model (``N^2 (d + d_v)`` vs ``2 N d d_v`` MACs per head), in both
directions; refused under a causal mask or a softmax; nothing to do for a single product.

(BN -> Heaviside folding with a negative gamma behind a non-conv producer is covered by
tests/passes/test_fold_batchnorm_rules.py: AddBNSpike, exact ties included.)"""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import spikec.nn as snn
from spikec.core.checker import compare_with_torch
from spikec.ir.errors import PassError
from spikec.frontend import trace
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.passes import run_passes
from spikec.core.rewrite import retype
from spikec.core.verify import verify
from spikec.passes.reassociate_attention import REASSOCIATE_ATTENTION, costs, reassociate_attention


def layout(graph):
    return [(n.name, n.op, n.inputs) for n in graph.nodes]


def expected_order(n, d, dv):
    return "linear" if 2 * n * d * dv < n * n * (d + dv) else "pairwise"


# -- IR graphs built by hand: inputs q, k, v -> k^T -> two matmuls -----------------------------------
def node(name, op, inputs, attrs=None, kind="real"):
    return Node(name, op, tuple(inputs), TensorType((1,), kind), attrs or {})


def attention_graph(heads, n, d, dv, order, nk=None):
    """``out = (q k^T) v`` (order "pairwise") or ``q (k^T v)`` ("linear"); heads == 0: no head dim."""
    nk = n if nk is None else nk
    lead = (heads,) if heads else ()
    perm = (0, 2, 1) if heads else (1, 0)
    nodes = [Node("q", "input", (), TensorType((*lead, n, d), "binary")),
             Node("k", "input", (), TensorType((*lead, nk, d), "binary")),
             Node("v", "input", (), TensorType((*lead, nk, dv), "binary")),
             node("kt", "transpose", ["k"], {"perm": perm})]
    if order == "pairwise":
        nodes += [node("scores", "matmul", ["q", "kt"]), node("out", "matmul", ["scores", "v"])]
    else:
        nodes += [node("kv", "matmul", ["kt", "v"]), node("out", "matmul", ["q", "kv"])]
    return verify(retype(Graph(nodes, ("out",))))


def spike_inputs(rng, graph, steps, batch, p):
    return {g.name: (rng.random((steps, batch, *g.type.shape)) < p).astype(np.float64) for g in graph.inputs}


def products(graph):
    """The two matmuls as (outer inputs, inner inputs)."""
    outer = graph.node("out")
    inner = next(graph.node(i) for i in outer.inputs if graph.node(i).op == "matmul")
    return outer, inner


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heads=st.integers(0, 3), n=st.integers(1, 12), d=st.integers(1, 12), dv=st.integers(1, 12),
       steps=st.integers(1, 3), batch=st.integers(1, 3), p=st.sampled_from([0.1, 0.5, 0.9]),
       order=st.sampled_from(["pairwise", "linear"]), seed=st.integers(0, 2 ** 32 - 1))
def test_reassociation_is_bitwise_exact_and_follows_the_cost_model(heads, n, d, dv, steps, batch, p, order, seed):
    graph = attention_graph(heads, n, d, dv, order)
    x = spike_inputs(np.random.default_rng(seed), graph, steps, batch, p)
    result = reassociate_attention(graph)
    after = verify(result.graph)
    before_out, after_out = run(graph, x).values["out"], run(after, x).values["out"]
    assert np.array_equal(after_out, before_out)
    # the reference: torch's own float64 product in the source order
    q, k, v = (torch.tensor(x[name]) for name in "qkv")
    kt = k.transpose(-1, -2)
    ref = (q @ kt) @ v if order == "pairwise" else q @ (kt @ v)
    assert np.array_equal(after_out, ref.numpy())

    best = expected_order(n, d, dv)
    (decision,) = result.graph.meta["attention"]
    h = heads or 1
    assert decision["node"] == "out" and decision["source_order"] == order
    assert decision["chosen_order"] == best
    assert dict(decision["macs"]) == {"pairwise": h * n * n * (d + dv), "linear": h * 2 * n * d * dv}
    assert dict(decision["macs"]) == costs(n, n, d, dv, h)
    assert (decision["tokens"], decision["head_dim"]) == (n, d)
    outer, inner = products(after)
    if best == "linear":
        assert outer.inputs[0] == "q" and inner.inputs == ("kt", "v")
    else:
        assert outer.inputs[1] == "v" and inner.inputs == ("q", "kt")
    assert result.skipped == ()
    assert (set(result.changed) != set()) == (best != order)
    if best == order:
        assert layout(after) == layout(graph)
    t = after.node("out").type
    assert t == graph.node("out").type and (t.kind, t.ceiling) == ("integer", n * d)


@pytest.mark.parametrize("n, d, dv", [(16, 8, 8), (64, 16, 16), (9, 4, 2)])
def test_pairwise_source_with_few_features_becomes_linear(n, d, dv):
    graph = attention_graph(2, n, d, dv, "pairwise")
    result = reassociate_attention(graph)
    after = verify(result.graph)
    outer, inner = products(after)
    assert inner.name == "out.kv" and inner.inputs == ("kt", "v") and outer.inputs == ("q", "out.kv")
    assert "scores" not in after and set(result.changed) == {"scores", "out"}
    assert any("pairwise order -> linear" in note for note in result.notes)
    x = spike_inputs(np.random.default_rng(0), graph, 2, 2, 0.5)
    assert np.array_equal(run(after, x).values["out"], run(graph, x).values["out"])


@pytest.mark.parametrize("n, d, dv", [(4, 16, 16), (2, 8, 3), (8, 32, 8)])
def test_linear_source_with_more_features_than_tokens_becomes_pairwise(n, d, dv):
    assert expected_order(n, d, dv) == "pairwise"
    graph = attention_graph(2, n, d, dv, "linear")
    result = reassociate_attention(graph)
    after = verify(result.graph)
    outer, inner = products(after)
    assert inner.name == "out.qk" and inner.inputs == ("q", "kt") and outer.inputs == ("out.qk", "v")
    assert "kv" not in after
    (decision,) = after.meta["attention"]
    assert (decision["source_order"], decision["chosen_order"]) == ("linear", "pairwise")
    x = spike_inputs(np.random.default_rng(1), graph, 3, 2, 0.6)
    assert np.array_equal(run(after, x).values["out"], run(graph, x).values["out"])
    # the pass manager agrees: no mismatch, the same verdict when the pass is named explicitly
    _, (record,) = run_passes(graph, [REASSOCIATE_ATTENTION], x, explicit=True)
    assert record.spike_mismatches == 0 and record.comparison["equivalent"]


def test_cost_model_counts_keys_and_queries_separately():
    nq, nk, d, dv = 6, 64, 8, 8
    graph = attention_graph(1, nq, d, dv, "pairwise", nk=nk)
    (decision,) = reassociate_attention(graph).graph.meta["attention"]
    assert dict(decision["macs"]) == {"pairwise": nq * nk * (d + dv), "linear": (nq + nk) * d * dv}
    assert decision["chosen_order"] == "linear"


# -- from PyTorch: SDSA-style heads of stateless spikes ---------------------------------------------
class SpikeAttention(nn.Module):
    """Q, K, V = [Linear(x) >= 0] per head (x: ``[T, B, heads, N, d]``), then ``(Q K^T) V`` or a variant."""

    def __init__(self, d, variant="plain"):
        super().__init__()
        self.variant = variant
        self.wq, self.wk, self.wv = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.q_spike, self.k_spike, self.v_spike = (snn.LIF(beta=0.0, threshold=0.0) for _ in range(3))

    def forward(self, x):
        q, k, v = self.q_spike(self.wq(x)), self.k_spike(self.wk(x)), self.v_spike(self.wv(x))
        if self.variant == "single":
            return q @ k.transpose(-2, -1)
        scores = q @ k.transpose(-2, -1)
        if self.variant == "causal":
            scores = torch.tril(scores)
        elif self.variant == "softmax":
            scores = scores.softmax(-1)
        elif self.variant == "scaled":
            scores = scores * 0.125
        out = scores @ v
        return out * 0.25


def traced(variant, heads=2, n=16, d=4, seed=0):
    torch.manual_seed(seed)
    model = SpikeAttention(d, variant).eval()
    graph = trace(model, (heads, n, d), input_kind="real")
    x = np.random.default_rng(seed).normal(size=(3, 2, heads, n, d))
    return model, graph, x


def matmuls(graph):
    return [n for n in graph.nodes if n.op == "matmul"]


def test_traced_spike_attention_is_reassociated_exactly():
    model, graph, x = traced("plain")
    outer = matmuls(graph)[-1]
    after, (record,) = run_passes(graph, [REASSOCIATE_ATTENTION], x, explicit=True)
    assert record.spike_mismatches == 0 and record.max_rel_diff == 0.0
    (decision,) = after.meta["attention"]
    assert decision["node"] == outer.name and decision["chosen_order"] == "linear"   # d = 4 < N = 16
    assert after.node(outer.name).inputs[1] == f"{outer.name}.kv"
    assert np.array_equal(run(after, x).values[outer.name], run(graph, x).values[outer.name])
    assert compare_with_torch(model, after, x).equivalent
    kinds = {n.name: n.type for n in matmuls(after)}
    assert kinds[f"{outer.name}.kv"].kind == "integer" and kinds[f"{outer.name}.kv"].ceiling == 16
    assert kinds[outer.name].ceiling == 16 * 4


def test_causal_mask_is_refused_naming_the_node():
    model, graph, x = traced("causal")
    outer = matmuls(graph)[-1]
    mask = next(n for n in graph.nodes if n.op == "causal_mask")
    result = reassociate_attention(graph)
    assert layout(result.graph) == layout(graph) and result.changed == ()
    assert "attention" not in result.graph.meta
    (skip,) = result.skipped
    assert skip.node == outer.name
    assert "causal mask" in skip.reason and repr(mask.name) in skip.reason and skip.remedy
    with pytest.raises(PassError) as info:
        run_passes(graph, [REASSOCIATE_ATTENTION], x, explicit=True)
    msg = info.value.message()
    assert repr(outer.name) in msg and "causal mask" in msg and "reassociate_attention" in msg
    after, (record,) = run_passes(graph, [REASSOCIATE_ATTENTION], x)          # not named: logged, not fatal
    assert [s["node"] for s in record.skipped] == [outer.name] and record.spike_mismatches == 0
    assert layout(after) == layout(graph)


def test_softmax_between_the_products_is_refused():
    model, graph, x = traced("softmax")
    outer = matmuls(graph)[-1]
    result = reassociate_attention(graph)
    assert layout(result.graph) == layout(graph) and result.changed == ()
    (skip,) = result.skipped
    assert skip.node == outer.name and "softmax" in skip.reason
    with pytest.raises(PassError):
        run_passes(graph, [REASSOCIATE_ATTENTION], x, explicit=True)


def test_single_product_is_left_alone():
    model, graph, x = traced("single")
    assert len(matmuls(graph)) == 1
    result = reassociate_attention(graph)
    assert layout(result.graph) == layout(graph)
    assert result.changed == () and result.skipped == () and result.notes == ()
    assert "attention" not in result.graph.meta
    _, (record,) = run_passes(graph, [REASSOCIATE_ATTENTION], x, explicit=True)
    assert record.nodes_changed == [] and record.spike_mismatches == 0


def test_graph_without_products_is_left_alone():
    graph = attention_graph(2, 4, 3, 3, "pairwise")
    plain = verify(graph.with_nodes(graph.nodes[:4], ("kt",)))
    result = reassociate_attention(plain)
    assert layout(result.graph) == layout(plain) and result.changed == () and result.skipped == ()


def test_other_op_between_the_products_is_reported():
    model, graph, x = traced("scaled")
    outer = matmuls(graph)[-1]
    result = reassociate_attention(graph)
    assert [s.node for s in result.skipped] == [outer.name]
