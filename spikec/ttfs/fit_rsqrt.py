"""Fit the fixed two-layer ReLU network that approximates ``1/sqrt(u)`` for the TTFS LayerNorm.

    g(u) = b2 + sum_j c_j * relu(k_j - u),      c_j >= 0,   on  u in [u_min, 1]

Hidden unit ``j`` is ``relu(-u + k_j)`` (weight -1, bias k_j: a B1 TTFS neuron), the output is a
non-negative combination of non-negative values (a B1 neuron: no cancellation, well conditioned in
time). Knots ``k_j`` are geometric in ``(u_min, 1]``; ``b2, c`` minimise the maximum *relative* error
``|g(u) sqrt(u) - 1|`` over a dense geometric grid, a linear program (scipy ``linprog``, HiGHS).
Below ``u_min`` the network extrapolates along its last segment (its error grows; the compiler reports
how many variances fell there). The LayerNorm maps its variance onto ``u = (var + eps) / S`` with ``S``
the calibrated maximum, and multiplies the output by ``1/sqrt(S)``.

Run: ``.venv/bin/python -m spikec.ttfs.fit_rsqrt [--hidden 64] [--u-min 0.00390625] [--out PATH]``.
Deterministic (no randomness); writes ``spikec/ttfs/data/rsqrt_net.npz``.
"""
import argparse
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "rsqrt_net.npz"


def fit(hidden: int = 64, u_min: float = 2.0 ** -8, grid: int = 8000) -> dict:
    knots = u_min * (1.0 / u_min) ** (np.arange(1, hidden + 1) / hidden)
    u = np.geomspace(u_min, 1.0, grid)
    feats = np.maximum(knots[None, :] - u[:, None], 0.0)          # (grid, hidden)
    s = np.sqrt(u)[:, None]
    # variables: b2, c_1..c_H, e ; minimise e
    a_fit = np.hstack([s, feats * s])                              # g(u) sqrt(u)
    ones = np.ones((grid, 1))
    a_ub = np.vstack([np.hstack([a_fit, -ones]), np.hstack([-a_fit, -ones])])
    b_ub = np.concatenate([np.ones(grid), -np.ones(grid)])
    cost = np.zeros(hidden + 2)
    cost[-1] = 1.0
    bounds = [(None, None)] + [(0, None)] * hidden + [(0, None)]
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if not res.success:
        raise RuntimeError(f"linprog failed: {res.message}")
    b2, c = res.x[0], res.x[1:-1]
    net = {"w1": -np.ones((hidden, 1)), "b1": knots.copy(), "w2": c.reshape(1, hidden), "b2": np.array([b2]),
           "u_min": np.array(u_min), "u_max": np.array(1.0)}
    dense = np.geomspace(u_min, 1.0, 200_001)
    net["max_rel_error"] = np.array(np.abs(evaluate(net, dense) * np.sqrt(dense) - 1).max())
    return net


def evaluate(net: dict, u: np.ndarray) -> np.ndarray:
    h = np.maximum(np.asarray(u, dtype=np.float64)[..., None] * net["w1"][:, 0] + net["b1"], 0.0)
    return h @ net["w2"][0] + net["b2"][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--u-min", type=float, default=2.0 ** -8)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    args = ap.parse_args()
    net = fit(args.hidden, args.u_min)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **net)
    print(f"hidden {args.hidden}, u in [{args.u_min:g}, 1]: max relative error {float(net['max_rel_error']):.3e}"
          f" -> {out}")


if __name__ == "__main__":
    main()
