"""TTFS on Loihi: the float TTFS graph (``--coding ttfs``) discretised onto an integer tick grid.

The continuous-time graph (semantics.md 1.4, passes.md "TTFS timing assignment") is made discrete here,
and only here; everything after this module is integer arithmetic.

Time. One grid step ``dt = T_w / states`` (``states`` ticks per window, default 64, the first row of the
``ttfs.discrete`` table). Every window edge ``t_min``, ``t_max`` must fall on the grid (``k = t / dt``, an
integer up to 1e-9), else the layer is refused. A spike at time ``t`` is emitted at the first tick at or after
it (the float simulator's ``dt`` mode: ``spikec.codings.ttfs.simulate``), so it lies in ``[k_min, k_max)``; a
neuron that would fire at or after ``k_max`` stays silent (it decodes to the bottom of its window).

Neuron (B1 and R-TTFS alike; the R-TTFS offset is in the threshold, passes.md). The continuous crossing is
``t = t_min + tau*theta - sum_j W'_ij (t_min - t_j)``; in ticks, with ``q_j = k_min - k_j`` (0 for a silent
input or one at or after ``k_min``), ``m = Theta_i - sum_j W'_ij q_j`` with ``Theta = tau*theta/dt``.
Multiplying by an integer ``R`` (the ramp, per tick): ``U_i = sum_j Wint_ij q_j``, ``Wint = round(R W')`` and
``vth_i = round(R Theta_i)``; the neuron fires at tick ``k_min + m``, ``m`` the first ``m >= 0`` with
``U_i + m R >= vth_i``. Lava computes ``U`` as a current-based neuron with no current decay: every input
spike adds its weight to the current ``u``, which the voltage integrates once per tick until ``k_min``; in
the window the voltage gains ``R`` per tick (the reference ramp) and the neuron fires once and locks out
(``ttfs_procs``). Weights are Loihi's 8-bit mantissas with a weight exponent: ``Wint = wq * 2**e``,
``R = floor(c 2**e)`` with ``c`` the largest scale keeping ``round(W' c)`` in the 8-bit range; ``e`` is the
largest exponent (<= 7) keeping every voltage within 24 bits (a static bound). The rounding of ``W'`` (half an
LSB of 8 bits) and of ``Theta`` (``1/(2R)`` tick) are the only approximations besides the time grid; their
effect on the outputs and the accuracy is measured (``ttfs_target.py``), never assumed.

Delays (``ttfs_delay``, a residual operand moved into the window before its layer's) must be whole ticks ``D``:
the source's spikes arrive at ``k_j + D``.

Refused (UnsupportedOp naming the node): products (a dynamic-weight synapse has no static-synapse form on
Loihi), delays that are not whole ticks, windows off the grid, several inputs. Pooling, flatten and conv are
folded into each layer's effective fan-out matrix (``spikec.codings.ttfs.simulate``'s ``_synapses``), lowered as a
Dense (its non-zero entries are the synapses a conv/sparse encoding would hold).
"""
import math
from dataclasses import dataclass

import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node
from spikec.targets.lava.fixed_point import full_range, round_weights
from spikec.codings.ttfs.simulate import _synapses

DEFAULT_STATES = 64
V_LIMIT = 2 ** 23 - 1        # 24-bit signed voltage and current
MAX_WEIGHT_EXP = 7
GRID_TOL = 1e-9


def is_ttfs(graph: Graph) -> bool:
    return any(n.op in ("ttfs_encode", "ttfs_fire") for n in graph.nodes)


@dataclass(frozen=True, eq=False)
class InputLayer:
    name: str               # the ttfs_encode node
    shape: tuple
    gain: float
    lo: float
    hi: float
    t_min: float
    t_ref: float
    t_max: float
    k_min: int
    k_max: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


@dataclass(frozen=True, eq=False)
class Layer:
    name: str               # the ttfs_fire node
    source: str             # the ANN node whose value it carries
    activation: str
    shape: tuple
    sources: tuple          # the layers (encode / fire node names) whose spikes it reads, in weight-row order
    delays: tuple           # per source: ticks its spikes are delayed by (a residual operand's ttfs_delay)
    wq: tuple               # per source: int64 (n_in, n_out) 8-bit mantissas
    weight_exp: int         # Wint = wq << weight_exp
    ramp: int               # R: voltage gained per tick in the window
    vth: np.ndarray         # int64 (n_out,)
    k_min: int
    k_max: int
    t_min: float
    t_ref: float
    t_max: float
    scale: float
    info: dict              # quantization figures (rounding errors, sign mode, voltage bound)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def wint(self, i: int) -> np.ndarray:
        return self.wq[i] << self.weight_exp


@dataclass(frozen=True, eq=False)
class TTFSNet:
    states: int             # ticks per window
    dt: float
    input: InputLayer
    layers: tuple           # Layer, in graph order
    outputs: tuple          # (graph output name, layer name, t_ref, scale)

    def layer(self, name: str):
        return self.input if name == self.input.name else next(l for l in self.layers if l.name == name)


def _refuse(node: Node, why: str, remedy: str) -> UnsupportedOp:
    return UnsupportedOp(f"the Lava target cannot map TTFS node {node.name!r} ({node.op}): {why}",
                         where=f"node {node.name!r}", remedy=remedy)


def _tick(node: Node, t: float, dt: float, what: str) -> int:
    k = t / dt
    if abs(k - round(k)) > GRID_TOL * max(1.0, abs(k)):
        raise _refuse(node, f"its {what} {t:g} is not on the time grid dt = {dt:g} ({k:.6g} ticks)",
                      "choose --ttfs-dt so that every window edge is a whole number of ticks (dt = window / n)")
    return int(round(k))


def map_ttfs(graph: Graph, states: int = DEFAULT_STATES) -> TTFSNet:
    """The integer TTFS network of the TTFS ``graph`` with ``states`` ticks per (first) window."""
    enc = [n for n in graph.nodes if n.op == "ttfs_encode"]
    if len(enc) != 1:
        raise _refuse(enc[1] if enc else graph.nodes[0], f"the graph has {len(enc)} TTFS input layers",
                      "the Lava TTFS lowering takes one input layer; use --target none")
    e = enc[0]
    a = e.attrs
    dt = (a["t_max"] - a["t_min"]) / int(states)
    inp = InputLayer(e.name, graph.node(e.inputs[0]).type.shape, float(a["gain"]), float(a["lo"]), float(a["hi"]),
                     float(a["t_min"]), float(a["t_ref"]), float(a["t_max"]), _tick(e, a["t_min"], dt, "t_min"),
                     _tick(e, a["t_max"], dt, "t_max"))
    for node in graph.nodes:   # products first: they, not their residual delays, are what Loihi lacks
        if node.op in ("ttfs_dynsyn", "ttfs_dynmatmul"):
            raise _refuse(node, "a product sub-layer uses a dynamic-weight synapse (one operand's value is the "
                                "weight of the other's spike); Loihi 2 synapses hold static weights",
                          "models with products or LayerNorm (mlp_ln, transformer) compile with --target none; "
                          "the Lava TTFS lowering maps Linear/Conv + ReLU/identity layers, pooling, flatten and "
                          "residual additions")
    layers = []
    for node in graph.nodes:
        if node.op == "ttfs_fire":
            layers.append(_layer(graph, node, dt, {l.name: l for l in [inp, *layers]}))
    outs = []
    for o in graph.outputs:
        d = graph.node(o)
        if d.op != "ttfs_decode" or d.inputs[0] not in [l.name for l in layers]:
            raise _refuse(d, "a TTFS graph output must decode the spike times of a TTFS layer",
                          "this is a compiler bug in the TTFS pass: report it with the model")
        outs.append((o, d.inputs[0], float(d.attrs["t_ref"]), float(d.attrs["scale"])))
    return TTFSNet(int(states), dt, inp, tuple(layers), tuple(outs))


def _layer(graph: Graph, node: Node, dt: float, known: dict) -> Layer:
    a = node.attrs
    syn = _synapses(graph, node)
    if syn.dynsyn is not None:
        raise _refuse(node, "it reads a product (dynamic-weight synapse)",
                      "models with products or LayerNorm compile with --target none")
    delays = []
    for (src, d), c in zip(syn.sources, syn.charges):
        if src not in known:
            raise _refuse(node, f"its source {src!r} is not an earlier TTFS layer", "report it with the model")
        delays.append(_tick(graph.node(c), d, dt, f"delay from {src!r}") if d else 0)
    k_min, k_max = _tick(node, a["t_min"], dt, "t_min"), _tick(node, a["t_max"], dt, "t_max")
    w = syn.wt                                    # (n_in total, n_out): float W'
    theta = np.asarray(node.params["threshold"], dtype=np.float64).reshape(-1) * float(a["tau"]) / dt
    q_max = np.concatenate([np.full(size, max(0, k_min - known[src].k_min - dl))
                            for (src, _), dl, size in zip(syn.sources, delays, syn.sizes)])
    c = full_range(w)
    e, ramp = _exponent(node, w, c, q_max, k_max - k_min)
    wq, _, winfo = round_weights(w, np.array([ramp / 2.0 ** e]), 1.0, node=node.name, what="TTFS weight")
    vth_f = np.round(theta * ramp)
    vth = np.clip(vth_f, -V_LIMIT - 1, V_LIMIT).astype(np.int64)
    bound = _v_bound(wq << e, q_max, ramp, k_max - k_min)
    info = {**winfo, "ramp": int(ramp), "weight_exp": int(e), "voltage_bound": int(bound),
            "weight_lsb_ticks": 2.0 ** e / ramp, "threshold_rounding_ticks": 0.5 / ramp,
            "thresholds_clipped_to_24_bits": int((vth != vth_f).sum()),
            "thresholds_clipped_note": "a threshold beyond the 24-bit range is clipped to its edge: the voltage "
                                       "(bounded by voltage_bound < 2^23) crosses neither, so no spike changes"}
    starts = np.cumsum([0, *syn.sizes])
    return Layer(node.name, a["source"], a["activation"], tuple(node.type.shape), tuple(s for s, _ in syn.sources),
                 tuple(delays),
                 tuple(wq[starts[i]:starts[i + 1]] for i in range(len(syn.sizes))), int(e), int(ramp), vth,
                 k_min, k_max, float(a["t_min"]), float(a["t_ref"]), float(a["t_max"]), float(a["scale"]), info)


def _v_bound(wint: np.ndarray, q_max: np.ndarray, ramp: int, ticks: int) -> int:
    """The largest ``|v|`` or ``|u|`` any input can produce: ``max_i sum_j |Wint_ij| q_max_j + R * ticks``."""
    return int((np.abs(wint).astype(np.int64) * q_max.astype(np.int64)[:, None]).sum(0).max(initial=0)
               + ramp * ticks)


def _exponent(node: Node, w: np.ndarray, c: float, q_max: np.ndarray, ticks: int) -> tuple[int, int]:
    """``(e, R)``: the largest weight exponent whose voltages stay within 24 bits, and its ramp."""
    for e in range(MAX_WEIGHT_EXP, -1, -1):
        ramp = math.floor(c * 2 ** e)
        if ramp < 1:
            continue
        wq = np.round(w * (ramp / 2.0 ** e)).astype(np.int64)
        if _v_bound(wq << e, q_max, ramp, ticks) <= V_LIMIT:
            return e, ramp
    raise _refuse(node, f"its voltage cannot stay within 24 bits at 8-bit weights (max |W'| "
                        f"{np.abs(w).max(initial=0):.4g} per tick of charge over {ticks} ticks)",
                  "use fewer states per window (a larger --ttfs-dt)")
