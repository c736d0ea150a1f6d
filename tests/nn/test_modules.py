"""The spikec.nn reference modules compute exactly the formulas of docs/neurons.md.

Hand-computed cases use dyadic values (exact in binary floating point), so equality is exact.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import spikec.nn as snn


def seq(values, channels=1):
    """A ``[T, 1, channels]`` float64 tensor; ``values`` is a list over t (scalars or per-channel lists)."""
    a = np.array(values, dtype=np.float64).reshape(len(values), 1, -1)
    if a.shape[2] == 1 and channels > 1:
        a = np.repeat(a, channels, axis=2)
    return torch.tensor(a)


def spikes(module, x):
    with torch.no_grad():
        return module.double()(x).numpy()


def flat(y):
    return y.reshape(y.shape[0], -1)[:, 0].tolist()


# -- LIF -----------------------------------------------------------------------------------
def test_lif_soft_reset_and_fires_at_exact_threshold():
    # beta=0.5: U1=0.5 (no), U2=0.25+0.75=1.0 (== theta: fires, H=0), U3=1.0 (fires), U4=0
    lif = snn.LIF(beta=0.5, threshold=1.0, reset="subtract")
    assert flat(spikes(lif, seq([0.5, 0.75, 1.0, 0.0]))) == [0, 1, 1, 0]


def test_lif_soft_reset_keeps_residual():
    # IF: U1=1.75 fires, H=0.75; U2=1.25 fires, H=0.25; U3=0.25 no
    lif = snn.LIF(beta=1.0, threshold=1.0, reset="subtract")
    assert flat(spikes(lif, seq([1.75, 0.5, 0.0]))) == [1, 1, 0]


def test_lif_hard_reset_to_zero_and_to_v_reset():
    x = seq([1.75, 0.5, 0.0])
    # reset to 0: U1=1.75 fires H=0; U2=0.5; U3=0.5 -> no further spike
    assert flat(spikes(snn.LIF(beta=1.0, threshold=1.0, reset="zero"), x)) == [1, 0, 0]
    # reset to v_reset=0.5: U1 fires H=0.5; U2=1.0 fires (>=) H=0.5; U3=0.5 no
    assert flat(spikes(snn.LIF(beta=1.0, threshold=1.0, reset="zero", v_reset=0.5), x)) == [1, 1, 0]


def test_lif_just_below_threshold_does_not_fire():
    below = np.nextafter(1.0, 0.0)
    lif = snn.LIF(beta=0.0, threshold=1.0)
    assert flat(spikes(lif, seq([below, 1.0, below]))) == [0, 1, 0]


def test_lif_bias_and_alpha():
    # beta=0, bias=0.5: U = x + 0.5 = [1.0, 0.75, 1.25]
    assert flat(spikes(snn.LIF(beta=0.0, bias=0.5), seq([0.5, 0.25, 0.75]))) == [1, 0, 1]
    # alpha=0.5, IF, soft: U = 0.5, 1.0 (fire, H=0), 0.5, 1.0 (fire)
    assert flat(spikes(snn.LIF(beta=1.0, alpha=0.5), seq([1.0, 1.0, 1.0, 1.0]))) == [0, 1, 0, 1]


def test_lif_stateless_heaviside_after_bn():
    # beta=0, theta=0: S = [X >= 0]; zero fires
    y = spikes(snn.LIF(beta=0.0, threshold=0.0), seq([-0.5, 0.0, 2.0, -1e-300]))
    assert flat(y) == [0, 1, 1, 0]


def test_lif_per_channel_parameters_act_on_dim_2():
    # [T, B, C=2, H=2]: C == H, so broadcasting on the wrong axis would be visible
    theta = [1.0, 2.0]
    lif = snn.LIF(beta=1.0, threshold=theta)
    x = torch.ones(3, 1, 2, 2, dtype=torch.float64)
    y = spikes(lif, x)
    # channel 0 fires every step; channel 1: U=1 (no), 2 (fire, H=0), 1 (no)
    assert np.array_equal(y[:, 0, 0], np.ones((3, 2)))
    assert np.array_equal(y[:, 0, 1], np.array([[0, 0], [1, 1], [0, 0]], dtype=float))


def test_lif_per_channel_vs_scalar_params_agree_when_equal():
    x = torch.tensor(np.random.default_rng(0).normal(size=(6, 2, 3, 4, 4)))
    a = spikes(snn.LIF(beta=0.75, threshold=0.5, bias=0.125, alpha=1.5), x)
    b = spikes(snn.LIF(beta=[0.75] * 3, threshold=[0.5] * 3, bias=[0.125] * 3, alpha=[1.5] * 3), x)
    assert np.array_equal(a, b)


def _lif_numpy(x, beta, alpha, bias, theta, reset, v_reset):
    """semantics.md 1.1 written literally, one channel vector per step (x: [T, B, C])."""
    h = np.zeros(x.shape[1:])
    out = []
    for t in range(x.shape[0]):
        u = beta * h + alpha * x[t] + bias
        s = (u >= theta).astype(np.float64)
        h = u - theta * s if reset == "subtract" else u * (1 - s) + v_reset * s
        out.append(s)
    return np.stack(out)


@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_lif_matches_literal_formula_per_channel(reset):
    rng = np.random.default_rng(1)
    c = 5
    # dyadic parameters and inputs: every intermediate is exact, ties occur
    beta = rng.integers(0, 5, c) / 4
    alpha = rng.integers(1, 5, c) / 4
    bias = rng.integers(-2, 3, c) / 8
    theta = rng.integers(1, 9, c) / 4
    v_reset = rng.integers(-2, 3, c) / 4
    x = rng.integers(-4, 9, (12, 3, c)) / 4
    lif = snn.LIF(beta=beta, alpha=alpha, bias=bias, threshold=theta, reset=reset, v_reset=v_reset)
    got = spikes(lif, torch.tensor(x))
    assert np.array_equal(got, _lif_numpy(x, beta, alpha, bias, theta, reset, v_reset))


def test_lif_rejects_bad_arguments():
    with pytest.raises(ValueError):
        snn.LIF(reset="bogus")
    with pytest.raises(ValueError):
        snn.LIF(threshold=[[1.0]])
    with pytest.raises(ValueError):
        snn.LIF()(torch.zeros(4, 3))  # not multi-step


# -- IntFire -------------------------------------------------------------------------------
@pytest.mark.parametrize("x, rounded, floored", [
    (0.5, 1, 0),     # half rounds up
    (1.5, 2, 1),
    (2.5, 3, 2),     # half-up, not banker's rounding (which would give 2)
    (0.49, 0, 0),
    (1.75, 2, 1),
    (-0.5, 0, 0),
    (-0.6, 0, 0),    # negative U gives 0
    (-3.0, 0, 0),
])
def test_intfire_rounding_single_step(x, rounded, floored):
    r = spikes(snn.IntFire(threshold=1.0, max_spikes=4, rounding="round"), seq([x]))
    f = spikes(snn.IntFire(threshold=1.0, max_spikes=4, rounding="floor"), seq([x]))
    assert flat(r) == [rounded] and flat(f) == [floored]


def test_intfire_threshold_scales():
    # z = 0.75 / 0.5 = 1.5 -> round 2, floor 1
    assert flat(spikes(snn.IntFire(threshold=0.5, rounding="round"), seq([0.75]))) == [2]
    assert flat(spikes(snn.IntFire(threshold=0.5, rounding="floor"), seq([0.75]))) == [1]


def test_intfire_ceiling_clip_keeps_excess_charge():
    # D=4: U=10 -> 4, H=6; U=6 -> 4, H=2; U=2 -> 2, H=0; U=0 -> 0
    y = spikes(snn.IntFire(threshold=1.0, max_spikes=4), seq([10.0, 0.0, 0.0, 0.0]))
    assert flat(y) == [4, 4, 2, 0]


def test_intfire_soft_reset_residual():
    # round: U1=1.25 -> 1, H=0.25; U2=0.5 -> 1 (half up), H=-0.5; U3=-0.5+0.25=-0.25 -> 0, H=-0.25
    x = seq([1.25, 0.25, 0.25])
    assert flat(spikes(snn.IntFire(threshold=1.0, rounding="round"), x)) == [1, 1, 0]
    # floor: U1 -> 1, H=0.25; U2=0.5 -> 0, H=0.5; U3=0.75 -> 0
    assert flat(spikes(snn.IntFire(threshold=1.0, rounding="floor"), x)) == [1, 0, 0]


def test_intfire_negative_charge_is_kept_not_reset():
    # U1=-1 -> 0, H=-1 (no reset); U2=-1+1.5=0.5 -> round 1
    y = spikes(snn.IntFire(threshold=1.0, rounding="round"), seq([-1.0, 1.5]))
    assert flat(y) == [0, 1]


def test_intfire_beta_alpha_per_channel():
    # ch0: beta=0.5, alpha=1, floor: U1=1.5 -> 1, H=0.5; U2=0.25+1=1.25 -> 1
    # ch1: beta=1, alpha=2, floor: U1=3 -> 3, H=0; U2=2 -> 2
    m = snn.IntFire(threshold=1.0, beta=[0.5, 1.0], alpha=[1.0, 2.0], rounding="floor", max_spikes=6)
    y = spikes(m, seq([[1.5, 1.5], [1.0, 1.0]]))
    assert np.array_equal(y[:, 0], np.array([[1, 3], [1, 2]], dtype=float))


def test_intfire_outputs_integers_in_range():
    x = torch.tensor(np.random.default_rng(2).normal(0, 3, size=(8, 4, 6)))
    for d in range(1, 7):
        y = spikes(snn.IntFire(threshold=0.7, max_spikes=d), x)
        assert np.array_equal(y, np.round(y)) and y.min() >= 0 and y.max() <= d


def test_intfire_rejects_bad_arguments():
    for kwargs in ({"rounding": "nearest"}, {"max_spikes": 0}, {"max_spikes": 2.5}, {"threshold": 0.0},
                   {"threshold": [1.0, -1.0]}):
        with pytest.raises(ValueError):
            snn.IntFire(**kwargs)


# -- SiLIF / CSiLIF ------------------------------------------------------------------------
def _params(m, names):
    return {n: getattr(m, n).detach().double().numpy().copy() for n in names}


def _set(m, **values):
    with torch.no_grad():
        for k, v in values.items():
            getattr(m, k).copy_(torch.as_tensor(v))


def test_silif_matches_numpy_recurrence():
    c = 3
    m = snn.SiLIF(c)
    _set(m, l=[-1.0, 0.0, 0.5], b=[1.0, 0.75, 2.0], v_th=[0.6, 0.3, 1.2])
    m = m.double()
    p = _params(m, ("l", "b", "v_th"))
    x = np.random.default_rng(3).uniform(-0.5, 1.5, size=(10, 2, c))
    a = np.exp(-np.exp(p["l"]))
    u, s, ref, margin = np.zeros((2, c)), np.zeros((2, c)), [], np.inf
    for t in range(10):
        u = a * (u - 0.5 * s) + p["b"] * x[t]
        s = (u >= p["v_th"]).astype(float)
        margin = min(margin, np.abs(u - p["v_th"]).min())
        ref.append(s)
    assert margin > 1e-9  # no tie decided by rounding
    ref = np.stack(ref)
    assert 0 < ref.sum() < ref.size
    assert np.array_equal(spikes(m, torch.tensor(x)), ref)


def test_silif_decay_formula():
    m = snn.SiLIF(2, l_init=0.25).double()
    assert np.allclose(m.decay().detach().numpy(), np.exp(-np.exp(0.25)), rtol=0, atol=1e-15)


def test_csilif_matches_complex_recurrence():
    c = 3
    m = snn.CSiLIF(c)
    _set(m, l=[-1.0, -0.5, 0.0], omega=[0.5, 2.0, 3.0], log_dt=[0.0, -0.5, 0.25], b=[1.0, 0.5, 1.5],
         v_th=[0.8, 0.4, 1.0])
    m = m.double()
    p = _params(m, ("l", "omega", "log_dt", "b", "v_th"))
    a = np.exp((-np.exp(p["l"]) + 1j * p["omega"]) * np.exp(p["log_dt"]))
    assert np.all(np.abs(a) < 1)
    x = np.random.default_rng(4).uniform(-0.5, 1.5, size=(12, 2, c))
    m_c, s, ref, margin = np.zeros((2, c), complex), np.zeros((2, c)), [], np.inf
    for t in range(12):
        m_c = a * (m_c - 0.5 * s) + p["b"] * x[t]
        u = 2 * m_c.real
        s = (u >= p["v_th"]).astype(float)
        margin = min(margin, np.abs(u - p["v_th"]).min())
        ref.append(s)
    assert margin > 1e-9
    ref = np.stack(ref)
    assert 0 < ref.sum() < ref.size
    assert np.array_equal(spikes(m, torch.tensor(x)), ref)
    # the real part of a must be what decay() reports
    a_re, a_im = (v.detach().numpy() for v in m.decay())
    assert np.allclose(a_re + 1j * a_im, a, rtol=1e-14, atol=0)


def test_csilif_resonates_unlike_silif():
    # A single impulse into CSiLIF with omega=pi/2 (dt=1): m = b a^t, Re(m) changes sign.
    m = snn.CSiLIF(1, l_init=-3.0, omega_init=np.pi / 2, log_dt_init=0.0, b_init=1.0, v_th_init=-10.0).double()
    x = seq([1.0] + [0.0] * 7)
    with torch.no_grad():
        y = m(x)
    assert y.sum() == 8  # v_th=-10: always fires; state still well defined
    p = _params(m, ("l", "omega", "log_dt"))
    a = np.exp((-np.exp(p["l"]) + 1j * p["omega"]) * np.exp(p["log_dt"]))
    assert abs(a) < 1


# -- TDM, BNTT, Delay ----------------------------------------------------------------------
def test_tdm_formula_with_zero_before_first_step():
    m = snn.TDM(2)
    _set(m, lam=[0.5, -0.25])
    x = seq([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.0]])
    y = spikes(m, x)[:, 0]
    expected = np.array([[1.5 * 1, 0.75 * 2],                      # t=1: x_0 = 0
                         [1.5 * 3 - 0.5 * 1, 0.75 * 4 + 0.25 * 2],
                         [1.5 * -1 - 0.5 * 3, 0.75 * 0 + 0.25 * 4]])
    assert np.array_equal(y, expected)


def test_tdm_per_channel_on_conv_layout():
    m = snn.TDM(2)
    _set(m, lam=[1.0, 0.0])
    x = torch.ones(2, 1, 2, 3, 3, dtype=torch.float64)
    y = spikes(m, x)
    assert np.all(y[0, :, 0] == 2) and np.all(y[1, :, 0] == 1)  # (1+1)*1 - 1*0 ; (1+1)*1 - 1*1
    assert np.all(y[:, :, 1] == 1)


def _random_bntt(c=3, steps=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    m = snn.BNTT(c, steps, eps=1e-3)
    with torch.no_grad():
        m.weight.copy_(torch.rand(steps, c, generator=g) + 0.5)
        m.bias.copy_(torch.randn(steps, c, generator=g))
        m.running_mean.copy_(torch.randn(steps, c, generator=g))
        m.running_var.copy_(torch.rand(steps, c, generator=g) + 0.1)
    return m


def test_bntt_eval_uses_statistics_of_each_step():
    m = _random_bntt().double().eval()
    x = torch.tensor(np.random.default_rng(5).normal(size=(4, 2, 3, 2, 2)))
    y = spikes(m, x)
    p = {k: getattr(m, k).detach().numpy() for k in ("weight", "bias", "running_mean", "running_var")}
    for t in range(4):
        c = (slice(None), None, None)
        ref = p["weight"][t][c] * (x[t].numpy() - p["running_mean"][t][c]) / np.sqrt(p["running_var"][t][c] + 1e-3) \
            + p["bias"][t][c]
        assert np.allclose(y[t], ref, rtol=1e-12, atol=1e-12)
    # the statistics really differ per step, so shared statistics would be caught above
    assert not np.allclose(p["running_mean"][0], p["running_mean"][1])


def test_bntt_training_updates_only_its_own_step_statistics():
    m = snn.BNTT(2, 3, momentum=0.5).double().train()
    x = torch.zeros(3, 4, 2, dtype=torch.float64)
    x[1] += 2.0  # only step 2 (index 1) has a nonzero batch mean
    m(x)
    mean = m.running_mean.detach().numpy()
    assert np.array_equal(mean[0], [0, 0]) and np.array_equal(mean[2], [0, 0])
    assert np.array_equal(mean[1], [1.0, 1.0])  # 0.5 * 0 + 0.5 * 2


def test_bntt_parameter_count_is_2TC():
    m = snn.BNTT(5, 7)
    assert sum(p.numel() for p in m.parameters()) == 2 * 7 * 5


def test_bntt_refuses_other_T():
    m = snn.BNTT(2, 4).eval()
    with pytest.raises(ValueError, match="T=4.*T=3"):
        m(torch.zeros(3, 1, 2))


@pytest.mark.parametrize("k", [0, 1, 2, 4, 5, 9])
def test_delay(k):
    T = 4
    x = torch.arange(1, T + 1, dtype=torch.float64).view(T, 1, 1).repeat(1, 2, 3)
    y = spikes(snn.Delay(k), x)
    expected = np.array([t - k if t > k else 0 for t in range(1, T + 1)], dtype=float)
    assert y.shape == x.shape
    assert np.array_equal(y[:, 1, 2], expected)
    if k == 0:
        assert np.array_equal(y, x.numpy())
    if k >= T:
        assert not y.any()


def test_delay_rejects_bad_steps():
    for k in (-1, 1.5):
        with pytest.raises(ValueError):
            snn.Delay(k)


# -- WindowSum -----------------------------------------------------------------------------
def test_windowsum_box_sum_with_zero_padding():
    y = spikes(snn.WindowSum(3), torch.ones(1, 1, 1, 3, 3, dtype=torch.float64))
    assert np.array_equal(y[0, 0, 0], [[4, 6, 4], [6, 9, 6], [4, 6, 4]])


def test_windowsum_dilation():
    y = spikes(snn.WindowSum(3, dilation=2), torch.ones(1, 1, 1, 5, 5, dtype=torch.float64))
    counts = np.array([2, 2, 3, 2, 2], dtype=float)  # offsets {-2, 0, 2} that stay inside 0..4
    assert np.array_equal(y[0, 0, 0], np.outer(counts, counts))


@pytest.mark.parametrize("k, d", [(1, 1), (3, 1), (3, 2), (5, 1), (5, 3)])
def test_windowsum_matches_explicit_sum(k, d):
    rng = np.random.default_rng(k * 10 + d)
    x = (rng.random((2, 2, 3, 7, 6)) < 0.4).astype(np.float64)
    y = spikes(snn.WindowSum(k, dilation=d), torch.tensor(x))
    r = d * (k - 1) // 2
    pad = np.pad(x, [(0, 0)] * 3 + [(r, r), (r, r)])
    ref = np.zeros_like(x)
    for i in range(k):
        for j in range(k):
            ref += pad[..., i * d:i * d + 7, j * d:j * d + 6]
    assert y.shape == x.shape and np.array_equal(y, ref)


def test_windowsum_rejects_even_kernel():
    with pytest.raises(ValueError):
        snn.WindowSum(2)
    with pytest.raises(ValueError):
        snn.WindowSum(3, dilation=0)


# -- RepConv -------------------------------------------------------------------------------
def _count(m):
    return sum(p.numel() for p in m.parameters())


def test_repconv_parameter_counts():
    assert _count(snn.RepConv(2, 32, stride=2)) == 10_624
    assert _count(snn.RepConv(32, 32, stride=1)) == 27_072


@pytest.mark.parametrize("c_in, c_out, stride, square", [(4, 4, 1, True), (4, 8, 1, False), (4, 4, 2, False),
                                                         (8, 4, 2, False)])
def test_repconv_identity_and_avgpool_only_when_square(c_in, c_out, stride, square):
    m = snn.RepConv(c_in, c_out, stride)
    assert (m.identity is not None) == square and (m.avgpool is not None) == square
    assert len(m.branches()) == (7 if square else 5)
    if square:
        pool = m.avgpool[0]
        assert (pool.kernel_size, pool.stride, pool.padding, pool.count_include_pad) == (3, 1, 1, True)


def test_repconv_refuses_identity_when_not_square():
    with pytest.raises(ValueError):
        snn.RepConv(4, 8, identity=True)
    with pytest.raises(ValueError):
        snn.RepConv(4, 4, stride=2, avgpool=True)


def test_repconv_branch_geometry():
    m = snn.RepConv(3, 5, stride=2)
    convs = {"conv3x3": ((3, 3), (1, 1)), "conv1x1": ((1, 1), (0, 0)), "conv1x3": ((1, 3), (0, 1)),
             "conv3x1": ((3, 1), (1, 0))}
    for name, (k, p) in convs.items():
        conv = getattr(m, name)[0]
        assert (conv.kernel_size, conv.padding, conv.stride, conv.bias) == (k, p, (2, 2), None)
    first, second = m.seq[0], m.seq[1]
    assert first.kernel_size == (1, 1) and first.stride == (1, 1) and first.bias is None
    assert second.kernel_size == (3, 3) and second.stride == (2, 2) and second.padding == (1, 1)


def test_repconv_is_sum_of_bn_branches():
    torch.manual_seed(0)
    m = snn.RepConv(3, 3).double().eval()
    for bn in (mod for mod in m.modules() if isinstance(mod, nn.BatchNorm2d)):
        with torch.no_grad():
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.5, 2)
            bn.weight.normal_()
            bn.bias.normal_()
    x = torch.rand(2, 2, 3, 5, 5, dtype=torch.float64)
    flat_x = x.flatten(0, 1)
    bn = lambda b, z: F.batch_norm(z, b.running_mean, b.running_var, b.weight, b.bias, False, 0.0, b.eps)
    ref = (bn(m.conv3x3[1], F.conv2d(flat_x, m.conv3x3[0].weight, padding=1))
           + bn(m.conv1x1[1], F.conv2d(flat_x, m.conv1x1[0].weight))
           + bn(m.conv1x3[1], F.conv2d(flat_x, m.conv1x3[0].weight, padding=(0, 1)))
           + bn(m.conv3x1[1], F.conv2d(flat_x, m.conv3x1[0].weight, padding=(1, 0)))
           + bn(m.seq[2], F.conv2d(F.conv2d(flat_x, m.seq[0].weight), m.seq[1].weight, padding=1))
           + bn(m.identity, flat_x)
           + bn(m.avgpool[1], F.avg_pool2d(flat_x, 3, 1, 1, count_include_pad=True)))
    with torch.no_grad():
        assert torch.allclose(m(x), ref.reshape(x.shape), rtol=1e-12, atol=1e-12)


def test_repconv_stride_2_output_shape():
    y = snn.RepConv(2, 4, stride=2).eval()(torch.zeros(3, 2, 2, 8, 8))
    assert y.shape == (3, 2, 4, 4, 4)


# -- TimeDistributed -----------------------------------------------------------------------
def test_time_distributed_applies_per_step():
    conv = nn.Conv2d(2, 3, 3, padding=1).double()
    td = snn.TimeDistributed(conv)
    x = torch.rand(4, 2, 2, 5, 5, dtype=torch.float64)
    with torch.no_grad():
        y = td(x)
        for t in range(4):
            assert torch.equal(y[t], conv(x[t]))


# -- gradients -----------------------------------------------------------------------------
@pytest.mark.parametrize("neuron", [snn.LIF(beta=0.9, threshold=0.5), snn.LIF(reset="zero"),
                                    snn.IntFire(threshold=0.5, max_spikes=3),
                                    snn.IntFire(threshold=0.5, rounding="floor")])
def test_surrogate_gradient_reaches_upstream_linear(neuron):
    torch.manual_seed(0)
    fc = nn.Linear(6, 5)
    x = torch.rand(5, 4, 6)
    out = neuron(fc(x))
    assert not out.requires_grad or out.grad_fn is not None
    out.sum().backward()
    assert fc.weight.grad is not None and fc.weight.grad.abs().sum() > 0
    assert torch.isfinite(fc.weight.grad).all()


def test_heaviside_surrogate_value():
    from spikec.nn.surrogate import heaviside
    x = torch.tensor([0.0, 1.0, -2.0], requires_grad=True)
    y = heaviside(x, 5.0)
    assert y.tolist() == [1.0, 1.0, 0.0]
    y.sum().backward()
    assert torch.allclose(x.grad, torch.tensor([1.0, 1 / 36, 1 / 121]))


def test_silif_and_csilif_parameters_get_gradients():
    torch.manual_seed(0)
    for m in (snn.SiLIF(4, v_th_init=0.3), snn.CSiLIF(4, v_th_init=0.3)):
        x = torch.rand(6, 3, 4)
        m(x).sum().backward()
        for name, p in m.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, name
