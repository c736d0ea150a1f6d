"""``bntt`` written step by step into one tensor gives, bit for bit, the stacked per-step expression it replaced."""
import numpy as np
import torch

from spikec.ir.graph import Node, TensorType
from spikec.ops import KernelContext, opdef
from spikec.ops.common import channel


def test_bntt_is_bit_identical_to_the_stacked_steps():
    rng = np.random.default_rng(0)
    steps, c = 5, 4
    params = {"gamma": rng.uniform(0.5, 1.5, (steps, c)), "beta": rng.normal(size=(steps, c)),
              "mean": rng.normal(size=(steps, c)), "var": rng.uniform(0.1, 2.0, (steps, c))}
    node = Node("bn", "bntt", ("x",), TensorType((c, 3, 3)), {"eps": 1e-5}, params)
    p = {k: torch.as_tensor(v) for k, v in params.items()}
    x = torch.as_tensor(rng.normal(size=(steps, 2, c, 3, 3)))
    got = opdef("bntt").kernel(KernelContext(False, {}), node, p, x)
    scale = p["gamma"] / torch.sqrt(p["var"] + 1e-5)
    shift = p["beta"] - p["mean"] * scale
    expected = torch.stack([x[t] * channel(scale[t], x.dim() - 1) + channel(shift[t], x.dim() - 1)
                            for t in range(steps)])
    assert (got.numpy().view(np.int64) == expected.numpy().view(np.int64)).all()
