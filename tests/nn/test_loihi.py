"""spikec.nn.loihi: each module's forward against Lava's own arithmetic on random integers, and gradients flow."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from spikec.nn import loihi


def _lava():
    from spikec.targets.lava._shim import import_lava
    import_lava()


@pytest.mark.parametrize("mode", ["mixed", "excitatory", "inhibitory"])
@pytest.mark.parametrize("exp", [-3, 0, 2])
def test_dense_is_lavas_dense(mode, exp):
    _lava()
    from lava.utils.weightutils import clip_weights, determine_sign_mode, truncate_weights
    g = torch.Generator().manual_seed(exp + 10)
    d = loihi.Dense(30, 7, weight_exp=exp)
    w = torch.rand(7, 30, generator=g) * 600 - 300
    w = {"mixed": w, "excitatory": w.abs(), "inhibitory": -w.abs()}[mode]
    with torch.no_grad():
        d.weight.copy_(w)
    x = (torch.rand(5, 3, 30, generator=g) < 0.5).double()
    got = d.double()(x).detach().numpy()
    # Lava's PyDenseModelBitAcc on the rounded mantissas: clip, truncate, W[:, s].sum(1), shift
    m = np.floor(w.double().numpy() + 0.5).astype(np.int64)
    mode_ = determine_sign_mode(m)
    lw = truncate_weights(clip_weights(m, mode_, num_bits=8), mode_, 8).astype(np.int64)
    a = np.einsum("tbi,oi->tbo", x.numpy().astype(np.int64), lw)
    want = np.left_shift(a, exp) if exp >= 0 else np.right_shift(a, -exp)
    assert np.array_equal(got, want)
    assert np.array_equal(d.integer_weights().detach().numpy(), lw)  # the weights Lava multiplies


def test_mixed_weights_are_a_fixed_point_of_lavas_rule():
    d = loihi.Dense(3, 1)
    with torch.no_grad():
        d.weight.copy_(torch.tensor([[1.0, -300.0, 0.0]]))
    assert d.integer_weights().tolist() == [[0.0, -255.0, 0.0]]   # rule(rule(m)): Lava keeps it as it is


def test_conv2d_is_an_integer_convolution():
    g = torch.Generator().manual_seed(1)
    c = loihi.Conv2d(3, 4, 3, stride=2, padding=1, weight_exp=2)
    with torch.no_grad():
        c.weight.copy_(torch.rand(4, 3, 3, 3, generator=g) * 500 - 250)
    x = (torch.rand(4, 2, 3, 9, 9, generator=g) < 0.4).float()
    w = np.floor(c.weight.detach().double().numpy() + 0.5)
    w = (np.clip(w, -256, 255).astype(np.int64) >> 1) << 1 << 2
    want = F.conv2d(x.double().flatten(0, 1), torch.from_numpy(w.astype(np.float64)), None, 2, 1)
    got32 = c(x)                  # float32 is exact: every value is an integer below 2^24
    assert torch.equal(got32.double().flatten(0, 1), want)
    with pytest.raises(ValueError, match="weight_exp"):
        loihi.Conv2d(1, 1, 3, weight_exp=-1)


def _lava_lif_run(a, du, dv, vth, bias_mant, bias_exp, reset):
    """Lava's PyLifModelBitAcc itself (subthr_dynamics, spiking_activation, reset) driven step by step."""
    _lava()
    from lava.proc.lif.models import PyLifModelBitAcc
    m = PyLifModelBitAcc({})
    shape = a.shape[1:]
    m.u, m.v = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    m.du, m.dv, m.vth = du, dv, vth
    m.bias_mant, m.bias_exp = np.full(shape, bias_mant, np.int16), np.full(shape, bias_exp, np.int16)
    m.scale_bias()
    m.scale_threshold()
    out = []
    for t in range(a.shape[0]):
        m.subthr_dynamics(activation_in=a[t].astype(np.int32))
        s = m.spiking_activation()
        if reset == "zero":
            m.reset_voltage(s)
        else:
            m.v[s] -= m.effective_vth
        out.append((s.copy(), m.u.copy(), m.v.copy()))
    return out


@pytest.mark.parametrize("reset", ["zero", "subtract"])
@pytest.mark.parametrize("du,dv", [(4095, 410), (100, 0), (0, 4095)])
def test_lif_is_lavas_lif(reset, du, dv):
    rng = np.random.default_rng(du + dv)
    a = rng.integers(-300, 900, size=(12, 3, 5)).astype(np.int64)
    lif = loihi.LIF(du=du, dv=dv, vth=700, bias_mant=-37.0, bias_exp=3, reset=reset, return_state=True)
    for dtype in (torch.float32, torch.float64):
        s, u, v = lif.to(dtype)(torch.from_numpy(a).to(dtype))
        want = _lava_lif_run(a, du, dv, 700, -37, 3, reset)
        for t, (ws, wu, wv) in enumerate(want):
            assert np.array_equal(s[t].detach().numpy(), ws)
            assert np.array_equal(u[t].detach().numpy(), wu)
            assert np.array_equal(v[t].detach().numpy(), wv)
    assert s.sum() > 0


@pytest.mark.parametrize("du", [0, 4095])        # du = 0: u wraps at the 2nd step; 4095: v saturates
def test_lif_wraps_the_current_and_saturates_the_voltage(du):
    a = np.full((6, 1, 2), 100_000, dtype=np.int64)   # a << 6 = 6.4e6
    a[:, :, 1] = -100_000
    lif = loihi.LIF(du=du, dv=0, vth=2 ** 17 - 1, reset="zero", return_state=True)
    s, u, v = (r.detach() for r in lif.double()(torch.from_numpy(a).double()))
    want = _lava_lif_run(a, du, 0, 2 ** 17 - 1, 0, 0, "zero")
    assert all(np.array_equal(v[t].numpy(), w[2]) and np.array_equal(u[t].numpy(), w[1]) for t, w in enumerate(want))
    assert (np.abs(v.numpy()) == 2 ** 23 - 1).any() if du else (np.abs(u.numpy()) < 6_400_000).any()


def test_decay_rounds_toward_zero_exactly_in_float32():
    x = torch.tensor([2.0 ** 24 - 1, -(2.0 ** 24 - 1), 4097.0, -4097.0, 1.0, -1.0])
    for f in (0, 1, 3686, 4095, 4096):
        want = [int(np.sign(v * f) * (abs(int(v) * f) >> 12)) for v in x.tolist()]
        assert loihi.decay(x, float(f)).tolist() == want


def test_per_channel_parameters_and_gradients_flow():
    torch.manual_seed(0)
    conv = loihi.Conv2d(1, 4, 3, padding=1)
    lif = loihi.LIF(du=torch.tensor([4095, 4000, 100, 0]), dv=410, vth=40, bias_mant=10.0, bias_exp=2, channels=4,
                    reset="subtract")
    dense = loihi.Dense(4 * 8 * 8, 3, weight_exp=-2, bias=True)
    x = (torch.rand(6, 2, 1, 8, 8) < 0.5).float()
    s = lif(conv(x))
    y = dense(s.flatten(2))
    assert s.sum() > 0 and set(s.unique().tolist()) <= {0.0, 1.0}
    y.float().mean().backward()
    for p in (conv.weight, lif.bias_mant, dense.weight, dense.bias):
        assert p.grad is not None and p.grad.abs().sum() > 0


@pytest.mark.parametrize("bad", [dict(du=4096), dict(dv=-1), dict(vth=1.5), dict(bias_exp=8), dict(reset="none")])
def test_bad_parameters_are_named(bad):
    with pytest.raises(ValueError):
        loihi.LIF(**bad)
