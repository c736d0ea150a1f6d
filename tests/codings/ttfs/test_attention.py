"""Products with a contraction (attention): the query acts as the synaptic weight of the key spikes; exact."""
import numpy as np
import torch
from torch import nn

from spikec.core.interpreter import run
from ttfs_helpers import TOL, assert_exact, assert_one_spike, map_and_check


class Attn(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        s = torch.relu(q @ k.transpose(-2, -1) * 0.5)
        return self.o(s @ v) + x


def test_softmax_free_attention_is_exact_and_residual_is_delayed():
    torch.manual_seed(0)
    model = Attn()
    x = np.random.default_rng(0).normal(size=(1, 5, 6, 4))
    plan, sim, check = map_and_check(model, (6, 4), x)
    assert_exact(check)
    assert_one_spike(sim)
    scores, out = plan.layer("matmul"), plan.layer("matmul_1")
    assert scores.contract and scores.depth == 4 and scores.shape == (6, 6)
    assert out.contract and out.depth == 6 and out.delays == {"relu": 0.0, "v": 2.0}
    assert plan.layers[-1].delays["input"] == 4.0            # the residual x waits four windows
    ops = {n.op for n in plan.graph.nodes}
    assert "ttfs_dynmatmul" in ops
    y = model.double()(torch.tensor(x)).detach().numpy()
    assert np.abs(sim.outputs[plan.outputs[0][0]] - y).max() <= TOL * np.abs(y).max()
    ir = run(plan.graph, x)
    s = sim.layers[scores.fire]
    assert np.abs(ir.values[scores.fire].reshape(s.times.shape) - s.times).max() <= TOL


def test_a_transposed_layer_is_a_view_not_a_new_layer():
    class Gram(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            h = torch.relu(self.fc(x))
            return h @ h.transpose(-2, -1)          # the product reads h and a view of h

    torch.manual_seed(1)
    x = np.random.default_rng(1).normal(size=(1, 4, 5, 3))
    plan, sim, check = map_and_check(Gram(), (5, 3), x)
    assert [l.kind for l in plan.layers] == ["input", "relu", "product_relu"]
    prod = plan.layers[2]
    assert prod.operands == (1, 1) and [n.op for n in prod.views[1]] == ["transpose"]
    assert_exact(check)
