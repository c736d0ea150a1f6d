"""LayerNorm as seven TTFS sub-layers (passes.md) -- an APPROXIMATION, never exact.

``layernorm`` (over the last dim, ``N`` features) is rewritten, in the ANN, into:

  1. mean         ``mu = (1/N) sum_j x_j``                       identity (R-TTFS), one neuron per row
  2. subtraction  ``c = x - mu``                                 identity (R-TTFS), N neurons
  3. square       ``c * c``                                      product sub-layer (B1), N neurons
  4. variance     ``v = (1/N) sum_j c_j^2``                      B1, one neuron
  5. 1/sqrt       ``r ~ 1/sqrt(v + eps)``: the fixed two-layer ReLU network of ``fit_rsqrt.py``
                  (``data/rsqrt_net.npz``, H hidden B1 neurons, one B1 output), applied to
                  ``u = (v + eps) / S`` with ``S`` the calibrated maximum of ``v + eps``, output times
                  ``1/sqrt(S)``                                   H + 1 neurons
  6. normalisation ``n = c * r``                                 product sub-layer (R-TTFS), N neurons
  7. affine       ``y = gamma * n + beta``                       identity (R-TTFS), N neurons

Every sub-layer but 5 is exact in value: 1, 2, 4, 7 are ordinary TTFS layers (weights 1/N, -1, gamma),
3 and 6 are products in which one operand's decoded value is the *synaptic weight* of the other
operand's spike (the mechanism the TTFS-LLM work uses for attention; a dynamic weight, not a static
synapse). Sub-layer 5 approximates ``1/sqrt`` with relative error ``max_rel_error`` (stored with the
weights) on ``u in [u_min, u_max]``; outside (rows whose variance is under ``u_min * S`` or over
``u_max * S``) it extrapolates and the error grows -- the compiler counts those rows. The decomposed
ANN is what the TTFS graph is checked against exactly; its distance to the true LayerNorm is reported
separately (``layernorm_error``: isolated, and cumulative with upstream approximations).

Neurons per normalised row: ``4N + H + 3`` (with ``fuse_affine``: ``3N + H + 3``).
"""
from pathlib import Path

import numpy as np

from spikec.ir.errors import PassError
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import infer_type

NET_PATH = Path(__file__).resolve().parent / "data" / "rsqrt_net.npz"


def load_rsqrt_net(path=None) -> dict:
    p = Path(path) if path else NET_PATH
    if not p.is_file():
        raise PassError(f"the fitted 1/sqrt network {str(p)!r} is missing",
                        remedy="run `python -m spikec.codings.ttfs.fit_rsqrt` to fit it again")
    with np.load(p) as z:
        return {k: np.array(z[k]) for k in z.files}


def rsqrt_net_eval(net: dict, u: np.ndarray) -> np.ndarray:
    h = np.maximum(np.asarray(u, dtype=np.float64)[..., None] * net["w1"][:, 0] + net["b1"], 0.0)
    return h @ net["w2"][0] + net["b2"][0]


def has_layernorm(graph: Graph) -> bool:
    return any(n.op == "layernorm" for n in graph.nodes)


def expand_layernorm(graph: Graph, calibration: np.ndarray, *, net: dict | None = None, headroom: float = 1.0,
                     fuse_affine: bool = False) -> tuple[Graph, list[dict]]:
    """Every ``layernorm`` replaced by its seven sub-layers; returns the graph and one record per LayerNorm.

    The LayerNorm output keeps its node name, so consumers are unchanged and the checker compares it.
    """
    lns = [n for n in graph.nodes if n.op == "layernorm"]
    if not lns:
        return graph, []
    net = net or load_rsqrt_net()
    trace = run(graph, calibration, progress=None)
    nodes, types, records = [], {}, []

    def emit(name, op, inputs, attrs=None, params=None, scope=""):
        node = Node(name, op, tuple(inputs), TensorType((1,)), attrs or {}, params or {}, scope)
        node = node.with_(type=infer_type(node, [types[i] for i in inputs]))
        nodes.append(node)
        types[name] = node.type
        return name

    for node in graph.nodes:
        if node.op != "layernorm":
            nodes.append(node)
            types[node.name] = node.type
            continue
        x, name, sc = node.inputs[0], node.name, node.scope
        n_feat, eps = node.type.shape[-1], float(node.attrs["eps"])
        xc = trace.values[x].reshape(-1, n_feat)
        var = xc.var(axis=1)
        s_max = headroom * float((var + eps).max()) if xc.size else 1.0
        s_max = s_max if s_max > 0 else 1.0
        w1, b1, w2, b2 = net["w1"], net["b1"], net["w2"], net["b2"]
        mean_sum = emit(f"{name}.mean_sum", "linear", [x], params={"weight": np.full((1, n_feat), 1.0 / n_feat)},
                        scope=sc)
        mean = emit(f"{name}.mean", "ttfs_mat", [mean_sum], {"activation": "identity"}, scope=sc)
        neg = emit(f"{name}.neg_mean", "linear", [mean], params={"weight": -np.ones((n_feat, 1))}, scope=sc)
        center = emit(f"{name}.center", "ttfs_mat", [emit(f"{name}.center_sum", "add", [x, neg], scope=sc)],
                      {"activation": "identity"}, scope=sc)
        square = emit(f"{name}.square", "ttfs_bmul", [center, center], {"activation": "relu"}, scope=sc)
        var_sum = emit(f"{name}.var_sum", "linear", [square], params={"weight": np.full((1, n_feat), 1.0 / n_feat)},
                       scope=sc)
        v = emit(f"{name}.var", "ttfs_mat", [var_sum], {"activation": "relu"}, scope=sc)
        # u = (v + eps) / S folded into the hidden layer; the output carries 1/sqrt(S)
        hid_in = emit(f"{name}.rsqrt_in", "linear", [v],
                      params={"weight": w1 / s_max, "bias": b1 + w1[:, 0] * eps / s_max}, scope=sc)
        hidden = emit(f"{name}.rsqrt_hidden", "relu", [hid_in], scope=sc)
        r_sum = emit(f"{name}.rsqrt_sum", "linear", [hidden],
                     params={"weight": w2 / np.sqrt(s_max), "bias": b2 / np.sqrt(s_max)}, scope=sc)
        r = emit(f"{name}.rsqrt", "ttfs_mat", [r_sum], {"activation": "relu"}, scope=sc)
        norm = emit(f"{name}.norm", "ttfs_bmul", [center, r], {"activation": "identity"}, scope=sc)
        gamma, beta = node.params["gamma"], node.params["beta"]
        if fuse_affine:
            emit(name, "ttfs_affine", [norm], params={"gain": gamma, "bias": beta}, scope=sc)
        else:
            aff = emit(f"{name}.affine", "ttfs_affine", [norm], params={"gain": gamma, "bias": beta}, scope=sc)
            emit(name, "ttfs_mat", [aff], {"activation": "identity"}, scope=sc)
        u = (var + eps) / s_max
        records.append({"node": name, "features": n_feat, "eps": eps, "variance_scale": s_max,
                        "rsqrt_hidden": int(w1.shape[0]), "fit_domain": [float(net["u_min"]), float(net["u_max"])],
                        "fit_max_rel_error": float(net["max_rel_error"]),
                        "calibration_rows_outside_domain": int(((u < float(net["u_min"])) |
                                                                (u > float(net["u_max"]))).sum()),
                        "calibration_rows": int(u.size),
                        "neurons_per_row": (3 if fuse_affine else 4) * n_feat + int(w1.shape[0]) + 3,
                        "sub_layers": ["mean", "subtraction", "square (product)", "variance",
                                       f"1/sqrt (2-layer ReLU net, {int(w1.shape[0])} hidden; APPROXIMATE)",
                                       "normalisation (product)",
                                       "affine" + (" (fused into its consumer)" if fuse_affine else "")]})
    return Graph(tuple(nodes), graph.outputs, graph.meta), records


def layernorm_error(original: Graph, expanded: Graph, records: list[dict], x: np.ndarray, net: dict) -> list[dict]:
    """Measured distance of each decomposed LayerNorm to the true one on ``x``.

    ``isolated``: the decomposition applied to the true LayerNorm input (its own error);
    ``cumulative``: the decomposed graph's value there (with every upstream approximation).
    """
    ta = run(original, x, progress=None)
    tb = run(expanded, x, progress=None)
    out = []
    for r in records:
        n_feat, name = r["features"], r["node"]
        node = original.node(name)
        xin = ta.values[node.inputs[0]].reshape(-1, n_feat)
        true = ta.values[name].reshape(-1, n_feat)
        c = xin - xin.mean(1, keepdims=True)
        u = (xin.var(axis=1) + r["eps"]) / r["variance_scale"]
        approx = c * (rsqrt_net_eval(net, u) / np.sqrt(r["variance_scale"]))[:, None] * node.params["gamma"] \
            + node.params["beta"]
        scale = max(np.abs(true).max(initial=0.0), 1e-300)
        iso = float(np.abs(approx - true).max(initial=0.0))
        cum = float(np.abs(tb.values[name].reshape(-1, n_feat) - true).max(initial=0.0))
        out.append({"node": name, "max_abs_error": iso, "max_rel_error": iso / scale,
                    "cumulative_max_abs_error": cum, "cumulative_max_rel_error": cum / scale,
                    "rows_outside_domain": int(((u < r["fit_domain"][0]) | (u > r["fit_domain"][1])).sum()),
                    "rows": int(u.size)})
    return out
