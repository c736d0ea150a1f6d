"""The in-place neuron kernels (``spikec.ops.neurons``: ``lif``, ``silif``, ``csilif``) give, bit for bit, what the
literal per-step expressions give (the kernels' earlier form, copied below): spikes, membrane and margins, the sign
of zero included, for scalar and per-channel parameters, both resets, real and spike inputs."""
import zlib

import numpy as np
import pytest
import torch

from spikec.ir.graph import Node, TensorType
from spikec.ops import KernelContext, opdef
from spikec.ops.common import channel


def _lif_literal(node, p, x):
    beta, alpha, bias, theta, v_reset = (channel(p[k], x.dim() - 1)
                                         for k in ("beta", "alpha", "bias", "threshold", "v_reset"))
    h, out = torch.zeros_like(x[0]), []
    for t in range(x.shape[0]):
        u = beta * h + alpha * x[t] + bias
        s = (u - theta >= 0).to(x.dtype)
        h = u - theta * s if node.attrs["reset"] == "subtract" else u * (1 - s) + v_reset * s
        out.append((s, u, (u - theta).abs()))
    return out


def _silif_literal(node, p, x):
    a, b, v_th = (channel(p[k], x.dim() - 1) for k in ("decay", "b", "threshold"))
    kappa, out = node.attrs["kappa"], []
    u, s = torch.zeros_like(x[0]), torch.zeros_like(x[0])
    for t in range(x.shape[0]):
        u = a * (u - kappa * s) + b * x[t]
        s = (u - v_th >= 0).to(x.dtype)
        out.append((s, u, (u - v_th).abs()))
    return out


def _csilif_literal(node, p, x):
    a_re, a_im, b, v_th = (channel(p[k], x.dim() - 1) for k in ("a_re", "a_im", "b", "threshold"))
    kappa, out = node.attrs["kappa"], []
    m_re, m_im, s = torch.zeros_like(x[0]), torch.zeros_like(x[0]), torch.zeros_like(x[0])
    for t in range(x.shape[0]):
        z_re = m_re - kappa * s
        m_re, m_im = a_re * z_re - a_im * m_im + b * x[t], a_re * m_im + a_im * z_re
        u = 2 * m_re
        s = (u - v_th >= 0).to(x.dtype)
        out.append((s, u, (u - v_th).abs()))
    return out


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().numpy().view(np.int64)


def _params(rng, names, c, per_channel, low, high):
    shape = (c,) if per_channel else ()
    return {k: rng.uniform(low.get(k, -1.0), high.get(k, 1.0), size=shape) for k in names}


CASES = {
    "lif": (_lif_literal, ("beta", "alpha", "bias", "threshold", "v_reset"),
            {"beta": 0.2, "alpha": 0.3, "threshold": 0.1}, {"beta": 1.0, "alpha": 1.5, "threshold": 1.5}),
    "silif": (_silif_literal, ("decay", "b", "threshold"), {"decay": 0.1, "b": 0.3, "threshold": 0.1},
              {"decay": 0.99, "b": 1.5, "threshold": 1.5}),
    "csilif": (_csilif_literal, ("a_re", "a_im", "b", "threshold"), {"a_re": 0.1, "b": 0.3, "threshold": 0.1},
               {"a_re": 0.9, "b": 1.5, "threshold": 1.5}),
}


OP_RESETS = [("lif", "subtract"), ("lif", "zero"), ("silif", None), ("csilif", None)]   # only lif has a reset


@pytest.mark.parametrize("op, reset", OP_RESETS)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("spikes", [False, True])
def test_in_place_kernel_is_bit_identical_to_the_literal_steps(op, reset, per_channel, spikes):
    literal, names, low, high = CASES[op]
    rng = np.random.default_rng(zlib.crc32(repr((op, per_channel, spikes, reset)).encode()))
    shape = (9, 3, 4, 5, 6)  # [T, B, C, H, W]
    x = (rng.random(shape) < 0.4).astype(np.float64) if spikes else rng.normal(0.3, 1.0, shape)
    x[0, 0, 0, 0, :2] = [0.0, -0.0]
    params = _params(rng, names, shape[2], per_channel, low, high)
    attrs = {"reset": reset} if op == "lif" else {"kappa": 0.5}
    node = Node("n", op, ("x",), TensorType(shape[2:], "binary"), attrs, params)
    p = {k: torch.as_tensor(v) for k, v in params.items()}
    xt = torch.as_tensor(x)
    got = opdef(op).kernel(KernelContext(False, {"n": 1, "x": 1}), node, p, xt)
    expected = literal(node, p, xt)
    for t, (s, u, m) in enumerate(expected):
        assert (_bits(got.spikes[t]) == _bits(s)).all(), (op, t, "spikes")
        assert (_bits(got.membrane[t]) == _bits(u)).all(), (op, t, "membrane")
        assert (_bits(got.margin[t]) == _bits(m)).all(), (op, t, "margin")
    assert 0 < float(got.spikes.mean()) < 1  # the case exercises both branches of the threshold


def test_every_in_place_kernel_case_is_run():
    assert {op for op, _ in OP_RESETS} == set(CASES)
