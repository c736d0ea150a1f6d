"""The TTFS coding's options and the data it maps and verifies on (``spikec compile ... --coding ttfs``).

Optional data on the model (the examples provide both): ``model.calibration_data()`` -> inputs
``[T, B, ...]`` that fix the per-layer scales (the verification inputs are always added, so they never
clip), and ``model.evaluation_data()`` -> ``(inputs [T, B, ...], labels [T*B])`` for the accuracy table.
The pass and the verifier derive both from the same options, so they see the same calibration.
"""
from dataclasses import dataclass

import numpy as np

from spikec.core.cost import E_AC_PJ, E_MAC_PJ
from spikec.ir.errors import BadInput
from spikec.ir.graph import Graph
from spikec.codings.ttfs.layernorm import expand_layernorm, has_layernorm, load_rsqrt_net

DEFAULTS = {
    "window": 1.0,          # T_w of every layer, in units of tau_c
    "tau": 1.0,             # tau_c
    "headroom": 1.0,        # calibration maximum * headroom fills the window
    "percentile": 100.0,    # < 100: scale from a percentile (more resolution, some clipping)
    "dt": None,             # the discrete-time step reported first (default: window / 64)
    "states": (16, 64, 256),  # further T_w / dt resolutions reported
    "tolerance": 1e-9,      # relative to the window
    "calibration": None,    # inputs [T, B, ...]; default model.calibration_data() if present
    "evaluation": None,     # (inputs, labels); default model.evaluation_data() if present
    "fuse_affine": False,   # LayerNorm: fold the affine sub-layer into its consumer
    "rsqrt_net": None,      # path of another fitted 1/sqrt network
    "max_samples": 4096,    # simulate at most this many samples of each set (the calibration set is subsampled)
    "spike_cost": 1.0,      # T_r of the spike-count energy proxy N_s * T_r (per-spike transmission cost, your unit)
    "e_ac_pj": E_AC_PJ,     # the shared cost model's 45 nm estimates (spikec.core.cost)
    "e_mac_pj": E_MAC_PJ,
}


def resolve(options: dict | None) -> dict:
    """``DEFAULTS`` overridden by the given options that are not None; an unknown option is BadInput."""
    unknown = set(options or {}) - set(DEFAULTS)
    if unknown:
        raise BadInput(f"unknown TTFS option(s) {sorted(unknown)}", remedy=f"known: {', '.join(DEFAULTS)}")
    return {**DEFAULTS, **{k: v for k, v in (options or {}).items() if v is not None}}


def timing_options(o: dict) -> dict:
    """The keyword arguments of ``assign_ttfs_timing`` (and of the pass) from resolved options."""
    return {"window": float(o["window"]), "tau": float(o["tau"]), "headroom": float(o["headroom"]),
            "percentile": float(o["percentile"])}


@dataclass(frozen=True)
class DataSets:
    calibration: np.ndarray     # [1, N, ...]: what fixes the scales (the model's calibration data + verification)
    sets: dict                  # name -> [1, N, ...] simulated for the report: verification, calibration, evaluation
    labels: np.ndarray | None   # of the evaluation set
    from_model: bool            # the calibration includes model.calibration_data()

    @property
    def base(self) -> str:
        """The set the spike counts and the discrete-time table are measured on (the largest the model gives)."""
        return "evaluation" if "evaluation" in self.sets else ("calibration" if "calibration" in self.sets
                                                              else "verification")


def flat(x) -> np.ndarray:
    """``[T, B, ...]`` as one step of ``T * B`` samples (the TTFS network is stateless)."""
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(1, x.shape[0] * x.shape[1], *x.shape[2:])


def _model_data(model, attr):
    fn = getattr(model, attr, None)
    return fn() if callable(fn) else None


def data_sets(model, inputs, o: dict) -> DataSets:
    """The calibration inputs and the sets the verifier simulates, from the options or the model's own data."""
    x_ver = flat(inputs)
    cal_model = o["calibration"] if o["calibration"] is not None else _model_data(model, "calibration_data")
    cal_model = None if cal_model is None else flat(cal_model)
    calibration = x_ver if cal_model is None else np.concatenate([cal_model, x_ver], axis=1)
    evaluation = o["evaluation"] if o["evaluation"] is not None else _model_data(model, "evaluation_data")
    sets = {"verification": x_ver}
    if cal_model is not None:  # a fixed subsample: the report's figures do not depend on the machine
        rng = np.random.default_rng(0)
        keep = cal_model.shape[1] if cal_model.shape[1] <= o["max_samples"] else o["max_samples"]
        sets["calibration"] = cal_model[:, np.sort(rng.choice(cal_model.shape[1], keep, replace=False))]
    labels = None
    if evaluation is not None:
        x_eval, labels = evaluation
        sets["evaluation"] = flat(x_eval)[:, :o["max_samples"]]
        labels = np.asarray(labels).reshape(-1)[:sets["evaluation"].shape[1]]
    return DataSets(calibration, sets, labels, cal_model is not None)


def decompose(graph: Graph, calibration: np.ndarray, o: dict) -> tuple[Graph, list[dict], dict | None]:
    """``(ann, records, net)``: every LayerNorm as seven sub-layers (APPROXIMATE), or the graph unchanged."""
    if not has_layernorm(graph):
        return graph, [], None
    net = load_rsqrt_net(o["rsqrt_net"])
    ann, records = expand_layernorm(graph, calibration, net=net, headroom=o["headroom"],
                                    fuse_affine=bool(o["fuse_affine"]))
    return ann, records, net
