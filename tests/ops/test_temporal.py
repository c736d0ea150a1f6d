"""``tdm`` written into one tensor gives, bit for bit (sign of zero included), the literal
``(1 + lam) x - lam prev`` with ``prev`` the input shifted one step (zeros first)."""
import numpy as np
import pytest
import torch

from spikec.ir.graph import Node, TensorType
from spikec.ops import KernelContext, opdef
from spikec.ops.common import channel


@pytest.mark.parametrize("steps", [1, 2, 6])
def test_tdm_is_bit_identical_to_the_literal_expression(steps):
    rng = np.random.default_rng(steps)
    c = 5
    lam = rng.normal(size=c)
    lam[0] = -0.5  # a negative lam: lam * 0 is -0, and -0 - (-0) is +0
    node = Node("tdm", "tdm", ("x",), TensorType((c, 3, 4)), {}, {"lam": lam})
    x = torch.as_tensor(rng.normal(size=(steps, 2, c, 3, 4)))
    x[0, :, :, 0, 0] = -0.0
    x[:, 0, :, 1, 1] = 0.0
    got = opdef("tdm").kernel(KernelContext(False, {}), node, {"lam": torch.as_tensor(lam)}, x)
    lam_t = channel(torch.as_tensor(lam), x.dim() - 1)
    prev = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
    expected = (1 + lam_t) * x - lam_t * prev
    assert (got.numpy().view(np.int64) == expected.numpy().view(np.int64)).all()
