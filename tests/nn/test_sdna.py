"""SDNA modules (spikec.nn.sdna) compute the formulas of passes.md "Spike-driven neighborhood attention".

Hand-computed cases for both window ops (zero padding, dilation, per-pair neuron state), an independent
loop-based reference, Pairwise != Linear, and one state_dict for both.
"""
import itertools

import numpy as np
import pytest
import torch

from spikec.nn.sdna import SDNALinear, SDNAPairwise


def t5(a):
    """A ``[T, B, C, H, W]`` float64 tensor from nested lists or an array of shape [T, C, H, W] (B = 1)
    or [H, W] (T = B = C = 1)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 2:
        a = a[None, None]
    return torch.tensor(a[:, None])


def fwd(module, q, k, v):
    with torch.no_grad():
        return module.double().eval()(q, k, v).numpy()


# -- independent references: explicit loops over pixels and window positions -------------------------
def window(h, w, i, j, k, d):
    """The in-image window positions of pixel (i, j), in row-major window order."""
    r = d * (k - 1) // 2
    for a, b in itertools.product(range(k), range(k)):
        y, x = i - r + a * d, j - r + b * d
        if 0 <= y < h and 0 <= x < w:
            yield y, x


def fire(u, theta, d):
    s = min(max(np.floor(u / theta + 0.5), 0), d)
    return s, u - theta * s


def naive_linear(q, k, v, ks, dil, theta, d, beta=1.0, alpha=1.0):
    q, k, v = (z.numpy() for z in (q, k, v))
    T, B, C, H, W = q.shape
    out, h = np.zeros_like(q), np.zeros(q.shape[1:])
    for t in range(T):
        for b, c, i, j in itertools.product(range(B), range(C), range(H), range(W)):
            l = sum(k[t, b, c, y, x] * v[t, b, c, y, x] for y, x in window(H, W, i, j, ks, dil)) * (1 / ks ** 2)
            g, h[b, c, i, j] = fire(beta * h[b, c, i, j] + alpha * l, theta, d)
            out[t, b, c, i, j] = q[t, b, c, i, j] * g
    return out


def naive_pairwise(q, k, v, ks, dil, theta, d, beta=1.0, alpha=1.0):
    q, k, v = (z.numpy() for z in (q, k, v))
    T, B, C, H, W = q.shape
    out, state = np.zeros_like(q), {}
    for t in range(T):
        for b, c, i, j in itertools.product(range(B), range(C), range(H), range(W)):
            total = 0.0
            for y, x in window(H, W, i, j, ks, dil):
                key = (b, c, i, j, y, x)
                a, state[key] = fire(beta * state.get(key, 0.0) + alpha * q[t, b, c, i, j] * k[t, b, c, y, x],
                                     theta, d)
                total += a * v[t, b, c, y, x]
            out[t, b, c, i, j] = total * (1 / ks ** 2)
    return out


# -- Linear ------------------------------------------------------------------------------------------
def test_linear_zero_padding_by_hand():
    # K = V = 1 on a 3x3 image: window sums of K*V are 4 (corners), 6 (edges), 9 (centre) -- zero padding.
    # L = sum/9; theta = 0.25: L/theta = 16/9 -> 2, 24/9 -> 3, 4 -> 4.  Q = 1 passes G through.
    ones = t5(np.ones((3, 3)))
    out = fwd(SDNALinear(3, 1, threshold=0.25), ones, ones, ones)
    assert out[0, 0, 0].tolist() == [[2, 3, 2], [3, 4, 3], [2, 3, 2]]


def test_linear_dilation_by_hand():
    # M = K*V = 9 at (2,2) of a 5x5 image only; dilation 2: (2,2) is in the window of the pixels at even
    # offsets (0, +-2) from it. L = 1 there, G = round(1/0.5) = 2; Q = 3 at (0,0), 1 elsewhere.
    k = np.zeros((5, 5)); k[2, 2] = 3
    q = np.ones((5, 5)); q[0, 0] = 3
    out = fwd(SDNALinear(3, 2, threshold=0.5), t5(q), t5(k), t5(k))[0, 0, 0]
    want = np.zeros((5, 5))
    want[::2, ::2] = 2
    want[0, 0] = 6
    assert np.array_equal(out, want)


def test_linear_gate_is_stateful_over_t():
    # One pixel (only the centre of its window is inside): K*V = 3.6, L = 3.6/9 = 0.4 (to 1 ulp), theta 1 (IF):
    # U = 0.4 (0 spikes), 0.8 (1, H = -0.2), 0.2 (0).
    kv = t5(np.full((3, 1, 1, 1), 3.6))
    out = fwd(SDNALinear(3, 1, threshold=1.0), torch.ones_like(kv), kv, torch.ones_like(kv))
    assert out.reshape(-1).tolist() == [0, 1, 0]


@pytest.mark.parametrize("ks,dil", [(3, 1), (3, 2), (5, 1)])
def test_linear_matches_loops(ks, dil):
    g = torch.Generator().manual_seed(ks * 10 + dil)
    q, k, v = (torch.randint(0, 5, (2, 2, 2, 5, 6), generator=g).double() for _ in range(3))
    got = fwd(SDNALinear(ks, dil, threshold=0.75, beta=0.5, alpha=0.5), q, k, v)
    assert np.array_equal(got, naive_linear(q, k, v, ks, dil, 0.75, 4, 0.5, 0.5))


# -- Pairwise ----------------------------------------------------------------------------------------
def test_pairwise_by_hand():
    # Q = 1, V = 1, K = 1..9 on a 3x3 image, theta = 2, D = 4: a = clip(round_half_up(K/2), 0, 4) =
    # 1,1,2,2,3,3,4,4,4. Centre: all 9 pairs, 24/9. Corner (0,0): K = 1,2,4,5 -> 1+1+2+3 = 7/9 (zero padding).
    k = np.arange(1, 10, dtype=float).reshape(3, 3)
    ones = t5(np.ones((3, 3)))
    out = fwd(SDNAPairwise(3, 1, threshold=2.0), ones, t5(k), ones)[0, 0, 0]
    assert out[1, 1] == 24 * (1 / 9) and out[0, 0] == 7 * (1 / 9)
    assert out[2, 2] == (3 + 3 + 4 + 4) * (1 / 9)   # K = 5, 6, 8, 9


def test_pairwise_dilation_by_hand():
    # 5x5, dilation 2: pixel (0,0) sees (0,0),(0,2),(2,0),(2,2); (1,1) sees (1,1),(1,3),(3,1),(3,3).
    # Q = 1, theta = 1, K = V = 1 on the even grid only: (0,0) -> 4/9, (1,1) -> 0, (2,2) -> 9/9.
    kv = np.zeros((5, 5)); kv[::2, ::2] = 1
    out = fwd(SDNAPairwise(3, 2, threshold=1.0), t5(np.ones((5, 5))), t5(kv), t5(kv))[0, 0, 0]
    assert out[0, 0] == 4 * (1 / 9) and out[1, 1] == 0 and out[2, 2] == 9 * (1 / 9) and out[0, 2] == 6 * (1 / 9)


def test_pairwise_neuron_state_per_pair_over_t():
    # One pixel: s = Q K = 0.4 each step, theta 1 (IF): U = 0.4 (0), 0.8 (1, H = -0.2), 0.2 (0); out = a/9.
    k = t5(np.full((3, 1, 1, 1), 0.4))
    out = fwd(SDNAPairwise(3, 1, threshold=1.0), torch.ones_like(k), k, torch.ones_like(k))
    assert out.reshape(-1).tolist() == [0, 1 / 9, 0]
    # leaky: beta = alpha = 0.5, s = 1.5: U = 0.75 (1, H = -0.25), 0.625 (1, H = -0.375), 0.5625 (1)
    k = t5(np.full((3, 1, 1, 1), 1.5))
    out = fwd(SDNAPairwise(3, 1, threshold=1.0, beta=0.5, alpha=0.5), torch.ones_like(k), k, torch.ones_like(k))
    assert out.reshape(-1).tolist() == [1 / 9] * 3


def test_pairwise_padding_contributes_nothing_even_when_the_gate_fires_on_zero():
    # Gate BN with bias 2: BN(0) = 2 makes the padded pairs fire, but their V_j is the zero padding.
    m = SDNAPairwise(3, 1, threshold=1.0, gate_bn=1).double().eval()
    m.gate_bn.bias.data.fill_(2.0)
    x = t5(np.ones((1, 1)))
    out = fwd(m, x, x, x)   # centre pair: BN(1) = 1/sqrt(1 + eps) + 2 -> 3 spikes
    assert out.reshape(-1).tolist() == [3 * (1 / 9)]


@pytest.mark.parametrize("ks,dil", [(3, 1), (3, 2), (5, 1)])
def test_pairwise_matches_loops(ks, dil):
    g = torch.Generator().manual_seed(ks * 10 + dil)
    q, k, v = (torch.randint(0, 5, (2, 2, 2, 5, 6), generator=g).double() for _ in range(3))
    got = fwd(SDNAPairwise(ks, dil, threshold=1.5, beta=0.5, alpha=0.5), q, k, v)
    assert np.array_equal(got, naive_pairwise(q, k, v, ks, dil, 1.5, 4, 0.5, 0.5))


# -- shared parameters, different functions ---------------------------------------------------------
@pytest.mark.parametrize("gate_bn", [None, 3])
def test_state_dict_is_interchangeable(gate_bn):
    lin = SDNALinear(3, 2, threshold=torch.tensor([0.5, 1.0, 1.5]), beta=0.25, alpha=0.75, gate_bn=gate_bn)
    pair = SDNAPairwise(3, 2, threshold=torch.ones(3), gate_bn=gate_bn)   # same layout, other values
    if gate_bn:
        lin.gate_bn.running_mean.uniform_(0, 1)
        lin.gate_bn.weight.data.uniform_(0.5, 2)
    assert list(lin.state_dict()) == list(pair.state_dict())
    pair.load_state_dict(lin.state_dict())   # strict
    for key, value in lin.state_dict().items():
        assert torch.equal(pair.state_dict()[key], value), key
    lin2 = SDNALinear(3, 2, threshold=torch.ones(3), gate_bn=gate_bn)
    lin2.load_state_dict(pair.state_dict())
    assert torch.equal(lin2.gate.threshold, torch.tensor([0.5, 1.0, 1.5]))


def test_pairwise_differs_from_linear_on_the_same_weights():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randint(0, 5, (2, 2, 3, 6, 6), generator=g).double() for _ in range(3))
    lin, pair = SDNALinear(3, 1, threshold=1.0), SDNAPairwise(3, 1)
    pair.load_state_dict(lin.state_dict())
    a, b = fwd(lin, q, k, v), fwd(pair, q, k, v)
    assert a.shape == b.shape == tuple(q.shape)
    assert not np.array_equal(a, b)


# -- training and validation -----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [SDNALinear, SDNAPairwise])
def test_gradients_flow_straight_through(cls):
    m = cls(3, 1, threshold=1.0, gate_bn=2).train()
    q, k, v = (torch.rand(2, 3, 2, 4, 4, requires_grad=True) * 4 for _ in range(3))
    for z in (q, k, v):
        z.retain_grad()
    m(q, k, v).sum().backward()
    assert all(z.grad is not None and z.grad.abs().sum() > 0 for z in (q, k, v))
    assert m.gate_bn.weight.grad is not None and int(m.gate_bn.num_batches_tracked) == 1


@pytest.mark.parametrize("cls", [SDNALinear, SDNAPairwise])
def test_bad_arguments_are_refused(cls):
    with pytest.raises(ValueError, match="odd kernel_size"):
        cls(4)
    with pytest.raises(ValueError, match="dilation"):
        cls(3, 0)
    with pytest.raises(ValueError, match="rounding"):
        cls(3, rounding="nearest")
    m = cls(3, gate_bn=2)
    x = torch.zeros(1, 1, 2, 4, 4)
    with pytest.raises(ValueError, match="one shape"):
        m(x, x, torch.zeros(1, 1, 2, 4, 5))
    with pytest.raises(ValueError, match="gate BN has 2 channels"):
        z = torch.zeros(1, 1, 3, 4, 4)
        m(z, z, z)
    with pytest.raises(ValueError, match="multi-step"):
        m(x[0], x[0], x[0])
