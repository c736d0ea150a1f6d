"""LayerNorm: the seven-sub-layer decomposition is APPROXIMATE; its error stays within the fitted bound."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec.codings.ttfs  # noqa: F401
from spikec.core.checker import compare_with_torch
from spikec.frontend import trace
from spikec.core.interpreter import run
from spikec.targets.ttfs import compile_ttfs
from spikec.codings.ttfs import summary_lines
from spikec.codings.ttfs.fit_rsqrt import fit
from spikec.codings.ttfs.layernorm import expand_layernorm, load_rsqrt_net, rsqrt_net_eval

NET = load_rsqrt_net()


class LNModel(nn.Module):
    def __init__(self, n=12):
        super().__init__()
        self.fc, self.norm, self.out = nn.Linear(n, n), nn.LayerNorm(n), nn.Linear(n, 3)

    def forward(self, x):
        return self.out(torch.relu(self.norm(self.fc(x))))


def _random_ln(seed, n=12):
    torch.manual_seed(seed)
    m = LNModel(n)
    m.norm.weight.data.uniform_(-2, 2)
    m.norm.bias.data.uniform_(-1, 1)
    return m


def _rows(rng, b, n, spread=30.0):
    """Rows whose variances spread over a factor ``spread**2`` (inside the fitted domain)."""
    return rng.normal(size=(1, b, n)) * rng.uniform(1.0, spread, size=(1, b, 1)) + rng.normal(size=(1, b, 1))


def test_layernorm_converter_is_bit_exact():
    m = _random_ln(0)
    g = trace(m, (12,), input_kind="real")
    assert "layernorm" in {n.op for n in g.nodes}
    x = _rows(np.random.default_rng(0), 8, 12)
    assert compare_with_torch(m, g, x).equivalent


@pytest.mark.parametrize("seed", range(4))
def test_decomposition_error_bound_on_random_inputs(seed):
    """|LN_decomposed - LN| <= |gamma| |n| eps_fit per element, for rows inside the fitted domain."""
    rng = np.random.default_rng(seed)
    m = _random_ln(seed)
    g = trace(m, (12,), input_kind="real")
    cal = _rows(rng, 64, 12)
    expanded, (rec,) = expand_layernorm(g, cal)
    x = np.concatenate([cal, _rows(rng, 64, 12)], axis=1)
    ta, tb = run(g, x), run(expanded, x)
    lin_in = ta.values["fc"].reshape(-1, 12)
    n = (lin_in - lin_in.mean(1, keepdims=True)) / np.sqrt(lin_in.var(1, keepdims=True) + rec["eps"])
    u = (lin_in.var(1) + rec["eps"]) / rec["variance_scale"]
    inside = (u >= NET["u_min"]) & (u <= NET["u_max"])
    gamma = m.norm.weight.detach().double().numpy()
    err = np.abs(ta.values["norm"] - tb.values["norm"]).reshape(-1, 12)
    bound = np.abs(gamma) * np.abs(n) * float(NET["max_rel_error"]) + 1e-12 * (1 + np.abs(n))
    assert inside.sum() > 64 and (err[inside] <= bound[inside]).all()
    assert err.max() > 0      # it is an approximation, not exact


def test_rows_below_the_fitted_domain_are_counted():
    rng = np.random.default_rng(9)
    m = _random_ln(9)
    m.fc.bias.data.zero_()                       # LN input scales with x: variances scale with x**2
    g = trace(m, (12,), input_kind="real")
    x = _rows(rng, 32, 12, spread=1.0)
    cal = np.concatenate([x, x * 1e-3], axis=1)  # 32 rows with variances 1e6 below the others (domain: 4096)
    _, (rec,) = expand_layernorm(g, cal)
    assert rec["calibration_rows_outside_domain"] == 32 and rec["calibration_rows"] == 64


def test_ttfs_graph_is_exact_to_the_decomposed_ann_and_labelled_approximate():
    rng = np.random.default_rng(3)
    m = _random_ln(3)
    g = trace(m, (12,), input_kind="real")
    x = _rows(rng, 16, 12)
    res = compile_ttfs(m, g, x, {"calibration": _rows(rng, 64, 12), "states": ()})
    rep = res.report
    assert res.ok and rep["verified"] and rep["exact"] is False
    assert rep["max_rel_window_error"] <= 1e-9 and rep["max_spikes_per_neuron"] <= 1
    (ap,) = rep["approximations"]
    assert ap["exact"] is False and ap["neurons_per_row"] == 4 * 12 + NET["w1"].shape[0] + 3
    assert ap["measured"]["verification"]["max_abs_error"] > 0
    kinds = [l["kind"] for l in rep["layers"] if l["name"].startswith("norm")]
    assert kinds == ["identity", "identity", "product_relu", "relu", "relu", "relu", "product_identity", "identity"]
    assert any("NOT exact" in line for line in summary_lines(rep))


def test_the_shipped_fit_is_reproducible():
    net = fit(hidden=NET["w1"].shape[0], u_min=float(NET["u_min"]), u_max=float(NET["u_max"]))
    assert float(net["max_rel_error"]) == pytest.approx(float(NET["max_rel_error"]), rel=1e-6)
    u = np.geomspace(float(NET["u_min"]), float(NET["u_max"]), 1000)
    assert np.abs(rsqrt_net_eval(NET, u) * np.sqrt(u) - 1).max() <= float(NET["max_rel_error"]) * (1 + 1e-9)
    assert (NET["w2"] >= 0).all()     # non-negative output weights: a B1 output, no cancellation


def test_fused_affine_drops_one_sub_layer_and_stays_exact_to_the_decomposition():
    rng = np.random.default_rng(5)
    m = _random_ln(5)
    g = trace(m, (12,), input_kind="real")
    res = compile_ttfs(m, g, _rows(rng, 16, 12), {"fuse_affine": True, "states": ()})
    (ap,) = res.report["approximations"]
    assert res.ok and ap["neurons_per_row"] == 3 * 12 + NET["w1"].shape[0] + 3
    assert "norm.affine" not in {l["name"] for l in res.report["layers"]}
