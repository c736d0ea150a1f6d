"""Pass rules no other test pinned: each test here kills a mutant of tools/mutants.py that survived the suite.

- repconv-accepts-uncentred: a branch conv that is not centred (padding != (k-1)/2) must not be fused as if
  it were padded (k-1)/2;
- attention-shared-product: a ``Q K^T`` that another node also reads must not be re-associated away.
"""
import numpy as np
import torch
from torch import nn

import spikec.nn as snn
from spikec.core.checker import compare_graphs
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.rewrite import retype
from spikec.core.verify import verify
from spikec.frontend import trace
from spikec.passes.fuse_repconv import fuse_repconv
from spikec.passes.reassociate_attention import reassociate_attention


# -- fuse_repconv: uncentred branch convolutions ---------------------------------------------------------
class UncentredUnit(nn.Module):
    """``BN(conv3x3_pad0(x)) + BN(conv3x3_pad0(x))`` -> LIF: two branches of one input, neither centred
    (a fused 3x3 conv padded 1 would compute a larger map with other values at the border)."""

    def __init__(self, c_in=2, c_out=3, padding=0):
        super().__init__()
        self.a = snn.TimeDistributed(nn.Conv2d(c_in, c_out, 3, 1, padding, bias=False), nn.BatchNorm2d(c_out))
        self.b = snn.TimeDistributed(nn.Conv2d(c_in, c_out, 3, 1, padding, bias=False), nn.BatchNorm2d(c_out))
        self.lif = snn.LIF(beta=0.5, threshold=0.3)

    def forward(self, x):
        return self.lif(self.a(x) + self.b(x))


def _randomized(model, seed=0):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                m.weight.copy_(torch.tensor(rng.normal(0, 0.5, m.weight.shape)))
            if isinstance(m, nn.BatchNorm2d):
                for t, lo, hi in ((m.weight, 0.5, 1.5), (m.bias, -0.3, 0.3), (m.running_mean, -0.2, 0.2),
                                  (m.running_var, 0.5, 1.5)):
                    t.copy_(torch.tensor(rng.uniform(lo, hi, t.shape)))
    return model.eval()


def test_uncentred_branch_convs_are_not_fused():
    model = _randomized(UncentredUnit(padding=0))
    graph = trace(model, (2, 6, 6))
    result = fuse_repconv(graph)
    assert not result.changed, "a unit whose convs are not centred fused anyway"
    assert any("centred" in s.reason for s in result.skipped), [s.reason for s in result.skipped]
    after = verify(result.graph)
    x = (np.random.default_rng(1).random((3, 2, 2, 6, 6)) < 0.4).astype(np.float64)
    assert compare_graphs(graph, after, x).equivalent


def test_centred_twin_of_the_same_unit_does_fuse():
    """The control: padding 1 (centred) fuses into one 3x3 conv and stays equivalent."""
    model = _randomized(UncentredUnit(padding=1))
    graph = trace(model, (2, 6, 6))
    result = fuse_repconv(graph)
    assert result.changed and not result.skipped
    x = (np.random.default_rng(2).random((3, 2, 2, 6, 6)) < 0.4).astype(np.float64)
    assert compare_graphs(graph, verify(result.graph), x).equivalent


# -- reassociate_attention: a product with a second reader ---------------------------------------------
def _node(name, op, inputs, attrs=None):
    return Node(name, op, tuple(inputs), TensorType((1,), "real"), attrs or {})


def _shared_scores_graph(n=6, d=2, dv=3):
    """``out = (q k^T) v`` where the scores ``q k^T`` are a graph output too (a second reader)."""
    nodes = [Node("q", "input", (), TensorType((n, d), "binary")),
             Node("k", "input", (), TensorType((n, d), "binary")),
             Node("v", "input", (), TensorType((n, dv), "binary")),
             _node("kt", "transpose", ["k"], {"perm": (1, 0)}),
             _node("scores", "matmul", ["q", "kt"]),
             _node("out", "matmul", ["scores", "v"])]
    return verify(retype(Graph(nodes, ("out", "scores"))))


def test_a_product_read_twice_is_not_reassociated():
    graph = _shared_scores_graph()
    # d = 2 < n = 6: the linear order would be cheaper, were the scores not needed elsewhere
    result = reassociate_attention(graph)
    assert not result.changed
    after = verify(result.graph)
    assert [n.name for n in after.nodes] == [n.name for n in graph.nodes]
    rng = np.random.default_rng(0)
    x = {i.name: (rng.random((2, 3, *i.type.shape)) < 0.5).astype(np.float64) for i in graph.inputs}
    ra, rb = run(graph, x), run(after, x)
    for o in graph.outputs:
        assert np.array_equal(ra.values[o], rb.values[o])
