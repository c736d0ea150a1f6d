"""NIR frontend: compile a ``.nir`` file (from snnTorch, Norse, Sinabs, Rockpool, or spikec) like a traced model.

NIR has no time step, so the file is read with an explicit ``dt`` and discretization ``scheme`` (those of
``spikec.formats.nir.interpreter``; defaults ``dt = 1e-4`` and ``"snntorch"``, what snnTorch's importer
does). ``load_nir(path, dt, scheme)`` returns the spikec IR graph. ``nir_model(path, dt, scheme)`` returns
an ``nn.Module`` whose forward runs the file with the NIR interpreter (float64) and whose converter emits
that IR: the driver traces it like any model, so the usual frontend check compares the IR against the
NIR interpreter.

Mapping (per scheme; the IR neuron is ``U = beta H + alpha X + bias``, ``S = [U >= theta]``, and a NIR
``v > v_th`` becomes ``theta = nextafter(v_th, +inf)``):

* ``LIF``, scheme snntorch: ``beta = 1 - dt/tau``, ``alpha = 1``, ``bias = v_leak/r``, ``theta = nextafter(v_th/g,
  +inf)``, ``v_reset/g`` with ``g = r*dt/tau`` -- the interpreter's arithmetic, bit for bit.
  Scheme norse: ``beta = 1 - a``, ``alpha = a r``, ``bias = a v_leak``, ``theta = nextafter(v_th, +inf)``
  with ``a = dt/tau`` (equal in exact arithmetic to Euler's ``v + a(r I + v_leak - v)``).
* ``IF``: as LIF with ``beta = 1``, ``g = r dt``. ``CubaLIF``, scheme snntorch, ``v_leak = v_reset = 0``, decays in
  [0, 1], ``v_threshold >= 0``: snnTorch's Synaptic (``synaptic_snntorch``, zero reset, no reset delay: Lava's CUBA
  neuron); otherwise a synapse node (a never-firing ``lif`` read out as its membrane) feeding a ``lif``. ``LI``,
  ``I``, ``CubaLI``: never-firing ``lif`` nodes read out as membrane (largest float64 threshold), in NIR units.
* ``Threshold`` -> a stateless ``lif`` (``beta = 0``).
* the cycle ``LI``/``I`` -> ``Threshold`` -> diagonal feedback -> back into the ``LI``/``I`` (what the spikec
  exporter writes for a subtract reset) -> one subtract-reset ``lif``; a CubaLIF whose membrane is its current, fed
  back through a per-neuron weight and an identity (what the exporter writes for snnTorch's Leaky, RLeaky and a
  subtract-reset ``lif``: ``nir_cycles``) -> ``lif_snntorch`` / ``rleaky_snntorch`` / a subtract-reset ``lif``;
  a CubaLIF <-> dense Affine/Linear cycle (the NIR paper's Braille RNN) -> RSynaptic summing its recurrence with the
  input (``rec_add="input"``), when ``recurrent_cubalif_reason`` finds nothing against it; any other cycle is refused.
* ``Affine``/``Linear`` -> ``linear``; ``Conv2d`` -> ``conv2d``; ``AvgPool2d`` -> ``avgpool2d`` (zero padding
  counted); ``SumPool2d`` -> a depthwise all-ones ``conv2d``; ``Flatten`` -> ``flatten`` (NIR's batch-free
  dims); ``Scale`` -> ``scale``, or a depthwise 1x1 conv / diagonal linear when per channel; ``Delay`` ->
  ``delay`` (a whole, uniform number of steps); nested graphs are inlined; several edges into a node -> ``add``.

Neuron parameters may be scalars, per channel, or per neuron if constant within each channel (the IR holds
one value per channel); anything else is refused naming the NIR node.

Stability: a time constant (``tau``, ``tau_syn``, ``tau_mem``) must be positive and its decay at ``dt``
(``1 - dt/tau``, Norse's ``1 - dt*(1/tau)``) within [0, 1]; otherwise the discretized neuron grows or
flips sign every step, so the file is refused naming the node and the parameter unless
``allow_unstable=True`` (the CLI's ``--allow-unstable``).

Conformance: a file nir's strict type check refuses (Rockpool's) is read leniently with inferred types and a
warning (``conformance.read_nir``); ``NIRModel.nir_diagnostics`` holds the per-node findings of
``conformance.nir_diagnostics`` (for ``report.json``'s ``frontend.nir_diagnostics``).
"""
import re
import warnings
from pathlib import Path

import nir
import numpy as np
import torch
from torch import nn

from spikec.ir.errors import BadInput, SpikecError, UnsupportedOp
from spikec.frontend.exact_neurons import require_stepping
from spikec.frontend.registry import ConvertContext, register_converter
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import verify
from spikec.frontend.snntorch_neurons import LIF_SNNTORCH, RLEAKY_SNNTORCH, SYNAPTIC_SNNTORCH
from spikec.ops.neurons import LIF
from spikec.ops.pooling import window_sum_as_conv
from spikec.formats.nir import interpreter
from spikec.frontend import nir_cycles
from spikec.formats.nir.conformance import nir_diagnostics, read_nir
from spikec.formats.nir.cuba import RECURRENT_CUBALIF_REMEDY, recurrent_cubalif_reason, synaptic_misfits
from spikec.formats.nir.interpreter import SCHEMES, inline, kind, schedule

DT = 1e-4
SCHEME = "snntorch"
NEVER = float(np.finfo(np.float64).max)  # threshold of a neuron read out as its membrane only
FEEDBACK = ("Affine", "Linear", "Scale", "Conv2d")
RECORDED = (LIF, "delay", LIF_SNNTORCH, RLEAKY_SNNTORCH)  # ops whose nodes carry attrs nir_dt, nir_scheme (what
# the file was read at)


def _ir_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", name) or "node"


def _unsupported(name, node, why, remedy=""):
    raise UnsupportedOp(why, where=f"NIR node {name!r} ({kind(node)})", remedy=remedy)


TIME_CONSTANTS = {"LIF": ("tau",), "LI": ("tau",), "CubaLIF": ("tau_syn", "tau_mem"), "CubaLI": ("tau_syn", "tau_mem")}
ALLOW = "pass --allow-unstable to compile it anyway"
ROUNDING = 1e-12  # tau == dt may give a decay of -1 ulp (Norse's dt*(1/tau)): that is 0, not a sign flip


def check_stability(nodes: dict, dt: float, scheme: str, allow_unstable: bool = False) -> None:
    """Refuse a time constant that is not positive or whose decay at ``dt`` leaves [0, 1] (a membrane that
    grows, or flips sign every step), naming the NIR node, the parameter and its value; ``allow_unstable``
    lets a finite decay through (a zero or NaN time constant has no discrete form at all)."""
    for name, node in nodes.items():
        if isinstance(node, tuple):
            continue
        for param in TIME_CONSTANTS.get(kind(node), ()):
            tau = np.asarray(getattr(node, param), dtype=np.float64)
            _check_time_constant(name, node, param, tau, dt, scheme, allow_unstable)


def _check_time_constant(name, node, param, tau, dt, scheme, allow_unstable):
    where = f"NIR node {name!r} ({kind(node)})"
    formula = f"1 - dt/{param}" if scheme == "snntorch" else f"1 - dt*(1/{param})"
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # tau = 0 or nan: reported below
        decay = 1 - dt / tau if scheme == "snntorch" else 1 - dt * (1 / tau)
    uniform = tau.size == 0 or bool((tau == tau.flat[0]).all())
    at = lambda i: param if uniform else f"{param}[{', '.join(map(str, i))}]"   # the entry at fault, when per neuron
    bad = ~np.isfinite(decay)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise BadInput(f"{at(i)} = {tau[i]:g} gives the decay {formula} = {decay[i]:g} at dt = {dt:g}: no discrete "
                       "neuron has it", where=where, remedy=f"give {param} a positive value in the file")
    if allow_unstable:
        return
    bad = ~(tau > 0)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise BadInput(f"{at(i)} = {tau[i]:g} is not a positive time constant: the decay {formula} = {decay[i]:g} "
                       f"at dt = {dt:g} makes the membrane grow every step", where=where,
                       remedy=f"give {param} a positive value in the file, or {ALLOW}")
    bad = ~((decay >= -ROUNDING) & (decay <= 1))
    if bad.any():
        i = tuple(np.unravel_index(int(np.argmin(np.where(bad, decay, np.inf))), decay.shape))
        raise BadInput(f"{at(i)} = {tau[i]:g} with dt = {dt:g} (dt > {param}) gives the decay {formula} = "
                       f"{decay[i]:g}, outside [0, 1]: the discretized neuron flips sign every step and can grow",
                       where=where, remedy=f"use a smaller --dt (at most {float(tau.min()):g}), or {ALLOW}")


class _Converter:
    def __init__(self, ctx: ConvertContext, graph: nir.NIRGraph, dt: float, scheme: str, scope: str,
                 allow_unstable: bool = False):
        if scheme not in SCHEMES:
            raise BadInput(f"unknown NIR scheme {scheme!r}", remedy=f"use one of {', '.join(SCHEMES)}")
        if not dt > 0:
            raise BadInput(f"--dt must be positive, got {dt}")
        self.ctx, self.dt, self.scheme, self.scope = ctx, float(dt), scheme, scope
        self.nodes, self.edges = inline(graph)
        check_stability(self.nodes, self.dt, scheme, allow_unstable)
        self.order, self.back = schedule(self.nodes, self.edges)
        self.value: dict[str, str] = {}
        self.rename = _spikec_names(graph)  # a spikec-written file: give nodes back their IR names
        self.patterns: dict[str, tuple] = {}  # LI/I node -> (threshold node, feedback node, feedback weight)
        self.recurrent: dict[str, str] = {}  # CubaLIF node -> its dense feedback node (RSynaptic's recurrence)
        self.cycles: dict[str, list] = {}  # CubaLIF node -> its reset cycles [(feedback, identity)] (nir_cycles)
        self._find_patterns()

    # -- structure --------------------------------------------------------------------------
    def ins(self, n) -> list[str]:
        return [s for s, d in self.edges if d == n and (s, d) not in self.back]

    def outs(self, n) -> list[str]:
        return [d for s, d in self.edges if s == n]

    def _find_patterns(self):
        for u, v in sorted(self.back):
            fb, li = self.nodes[u], self.nodes[v]
            th_names = [s for s, d in self.edges if d == u]
            ok = (not isinstance(li, tuple) and kind(li) in ("LI", "I") and not isinstance(fb, tuple)
                  and kind(fb) in FEEDBACK and len(th_names) == 1 and self.outs(u) == [v])
            th = self.nodes[th_names[0]] if ok else None
            ok = ok and not isinstance(th, tuple) and kind(th) == "Threshold" and \
                [s for s, d in self.edges if d == th_names[0]] == [v]
            if not ok and not isinstance(li, tuple) and kind(li) == "CubaLIF":
                found = nir_cycles.loop(self, u, v)
                if isinstance(found, str):
                    _unsupported(v, li, found, nir_cycles.REMEDY)
                if found:   # a Leaky / RLeaky / subtract-reset lif reset cycle (read when the CubaLIF is emitted)
                    self.cycles.setdefault(v, []).append(found)
                    continue
                why = recurrent_cubalif_reason(self, u, v)
                if why:
                    _unsupported(v, li, why, RECURRENT_CUBALIF_REMEDY)
                self.recurrent[v] = u
                continue
            if not ok:
                _unsupported(v, self.nodes[v], f"the recurrent edge {u!r} -> {v!r} is not the subtract-reset "
                             "pattern LI/I -> Threshold -> diagonal feedback -> LI/I; the IR has no other recurrence",
                             "unroll the recurrence, or export it as a subtract-reset neuron")
            self.patterns[v] = (th_names[0], u, self._diagonal(u, fb))
        # an RLeaky's recurrence bias, written on its input path (Affine(I, b)): folded back into the op
        self.rec_bias = {v: a for v in self.cycles if (a := nir_cycles.input_bias(self, v))}
        for v in set(self.cycles) & set(self.recurrent):
            _unsupported(v, self.nodes[v], f"a CubaLIF both in a reset cycle {self.cycles[v][0]} and fed back directly "
                         f"through {self.recurrent[v]!r}: neither the RLeaky nor the RSynaptic form spikec reads")

    def _diagonal(self, name, node) -> np.ndarray:
        """The per-neuron weight of a feedback node that only scales each neuron (zero bias)."""
        k = kind(node)
        if k == "Scale":
            return np.asarray(node.scale, dtype=np.float64)
        if k in ("Affine", "Linear"):
            w = np.asarray(node.weight, dtype=np.float64)
            if w.ndim != 2 or w.shape[0] != w.shape[1] or np.count_nonzero(w - np.diag(np.diag(w))):
                _unsupported(name, node, "a recurrent weight that is not diagonal has no IR form (only a "
                             "subtract-reset feedback, one weight per neuron, is supported)")
            if k == "Affine" and np.any(np.asarray(node.bias) != 0):
                _unsupported(name, node, "a subtract-reset feedback with a bias")
            return np.diag(w).copy()
        w = np.asarray(node.weight, dtype=np.float64)
        c, groups = w.shape[0], int(np.asarray(node.groups))
        if w.shape[2:] != (1, 1) or np.any(np.asarray(node.bias) != 0) or \
                any(int(v) != 1 for v in np.atleast_1d(np.asarray(node.stride))):
            _unsupported(name, node, "a recurrent conv that is not a 1x1, stride-1, bias-free per-channel scale")
        if groups == c and w.shape[1] == 1:
            return w[:, 0, 0, 0].copy()
        m = w[:, :, 0, 0]
        if groups != 1 or m.shape[0] != m.shape[1] or np.count_nonzero(m - np.diag(np.diag(m))):
            _unsupported(name, node, "a recurrent conv that mixes channels")
        return np.diag(m).copy()

    # -- emission helpers --------------------------------------------------------------------
    def emit(self, name, op, inputs, attrs=None, params=None) -> str:
        if op in RECORDED:  # the time base the file was read at: the NIR export writes the file back at it
            attrs = {**(attrs or {}), "nir_dt": self.dt, "nir_scheme": self.scheme}
        return self.ctx.emit(_ir_name(self.rename.get(name, name)), op, inputs, attrs, params, scope=self.scope)

    def summed(self, n) -> str:
        srcs = [self.value[s] for s in self.ins(n)]
        if not srcs:
            _unsupported(n, self.nodes[n], "the node has no input")
        x = srcs[0]
        for k, s in enumerate(srcs[1:], 1):
            x = self.emit(f"{n}.sum{k}", "add", [x, s])
        return x

    def channel(self, name, node, value, shape, what) -> np.ndarray:
        """A NIR parameter (scalar, per channel, or per neuron) as the IR's () or (C,) array."""
        a = np.asarray(value, dtype=np.float64)
        if a.size == 1:
            return a.reshape(())
        try:
            full = np.broadcast_to(a, shape)
        except ValueError:
            _unsupported(name, node, f"{what} has shape {a.shape}; the neuron's input has shape {tuple(shape)}")
        per = full.reshape(shape[0], -1)
        if not (per == per[:, :1]).all():
            _unsupported(name, node, f"{what} varies within a channel; the IR holds one value per channel",
                         "use per-channel (or scalar) neuron parameters")
        vec = per[:, 0].copy()
        return np.asarray(vec[0]) if (vec == vec[0]).all() else vec

    def lif(self, name, x, beta, alpha, bias, theta, v_reset=0.0, reset="zero", output="spikes") -> str:
        attrs = {"reset": reset} if output == "spikes" else {"reset": reset, "output": "membrane"}
        params = {"beta": beta, "alpha": alpha, "bias": bias, "threshold": theta, "v_reset": v_reset}
        shape = self.ctx.type(x).shape
        params = {k: self._fit(name, np.asarray(v, dtype=np.float64), shape) for k, v in params.items()}
        return self.emit(name, LIF, [x], attrs, params)

    def _fit(self, name, v, shape):
        if v.ndim == 0 or v.shape == (shape[0],):
            return v
        _unsupported(name, self.nodes.get(name, ("?",)), f"parameter of shape {v.shape} for input {tuple(shape)}")

    def _nonzero(self, name, node, r):
        if np.any(np.asarray(r) == 0):
            _unsupported(name, node, "r = 0 disconnects the neuron's input")

    # -- nodes ---------------------------------------------------------------------------------
    def run(self, input_values: dict[str, str]) -> list[str]:
        outputs = []
        top_inputs = [n for n, v in self.nodes.items() if not isinstance(v, tuple) and kind(v) == "Input"]
        for n in self.order:
            node = self.nodes[n]
            if n in top_inputs:
                if n not in input_values:
                    raise BadInput(f"no value for NIR input {n!r}")
                self.value[n] = input_values[n]
                continue
            if isinstance(node, tuple):  # a nested graph's Input/Output
                self.value[n] = self.summed(n)
                continue
            k = kind(node)
            if k == "Output":
                self.value[n] = self.summed(n)
                outputs.append(self.value[n])
                continue
            if any(n == p[1] for p in self.patterns.values()) or n in self.recurrent.values() or \
                    any(n in loop for loops in self.cycles.values() for loop in loops):
                continue  # a subtract-reset feedback, a CubaLIF's recurrence or reset cycle: folded into its neuron
            if any(n == p[0] for p in self.patterns.values()):
                continue  # the spikes of a subtract-reset neuron, emitted with its LI/I
            if n in self.rec_bias.values():
                self.value[n] = self.summed(n)  # its bias is the RLeaky's (nir_cycles.input_bias)
                continue
            handler = getattr(self, f"node_{k}", None)
            if handler is None:
                _unsupported(n, node, f"NIR node type {k} has no IR mapping")
            try:
                self.value[n] = handler(n, node, self.summed(n))
            except SpikecError:
                raise
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
                raise BadInput(f"malformed node: {type(e).__name__}: {e}", where=f"NIR node {n!r} ({k})") from e
        if not outputs:
            raise BadInput("the NIR graph has no Output node", where="NIR graph")
        return outputs

    def node_Affine(self, n, node, x):
        return self.emit(n, "linear", [x], {}, {"weight": node.weight, "bias": node.bias})

    def node_Linear(self, n, node, x):
        return self.emit(n, "linear", [x], {}, {"weight": node.weight})

    def node_Conv2d(self, n, node, x):
        w = np.asarray(node.weight, dtype=np.float64)
        pair = lambda v: tuple(int(i) for i in np.broadcast_to(np.atleast_1d(np.asarray(v)), (2,)))
        dilation = pair(node.dilation)
        padding = node.padding
        if isinstance(padding, (str, bytes)):
            padding = padding.decode() if isinstance(padding, bytes) else padding
            if padding == "valid":
                padding = (0, 0)
            elif padding == "same" and all(k % 2 for k in w.shape[2:]):
                padding = tuple(d * (k - 1) // 2 for k, d in zip(w.shape[2:], dilation))
            else:
                _unsupported(n, node, f"padding {padding!r} with kernel {w.shape[2:]}")
        attrs = {"stride": pair(node.stride), "padding": pair(padding), "dilation": dilation,
                 "groups": int(np.asarray(node.groups))}
        return self.emit(n, "conv2d", [x], attrs, {"weight": w, "bias": node.bias})

    def node_Conv1d(self, n, node, x):
        _unsupported(n, node, "the IR has no 1-D convolution")

    def node_AvgPool2d(self, n, node, x):
        pair = lambda v: tuple(int(i) for i in np.broadcast_to(np.atleast_1d(np.asarray(v)), (2,)))
        attrs = {"kernel": pair(node.kernel_size), "stride": pair(node.stride), "padding": pair(node.padding),
                 "ceil_mode": False, "count_include_pad": True}
        return self.emit(n, "avgpool2d", [x], attrs)

    def node_SumPool2d(self, n, node, x):
        pair = lambda v: tuple(int(i) for i in np.broadcast_to(np.atleast_1d(np.asarray(v)), (2,)))
        attrs, params = window_sum_as_conv(self.ctx.type(x).shape[0], pair(node.kernel_size), pair(node.stride),
                                           pair(node.padding))
        return self.emit(n, "conv2d", [x], attrs, params)

    def node_Flatten(self, n, node, x):
        rank = len(self.ctx.type(x).shape)
        start, end = int(node.start_dim), int(node.end_dim)
        return self.emit(n, "flatten", [x], {"start": start % rank, "end": end % rank})

    def node_Scale(self, n, node, x):
        shape = self.ctx.type(x).shape
        s = self.channel(n, node, node.scale, shape, "scale")
        if s.ndim == 0:
            return self.emit(n, "scale", [x], {"a": float(s), "b": 0.0})
        if len(shape) == 3:
            attrs = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": shape[0]}
            return self.emit(n, "conv2d", [x], attrs, {"weight": s.reshape(-1, 1, 1, 1)})
        if len(shape) == 1:
            return self.emit(n, "linear", [x], {}, {"weight": np.diag(s)})
        _unsupported(n, node, f"a per-channel scale of a rank-{len(shape)} tensor")

    def node_Delay(self, n, node, x):
        steps = np.asarray(node.delay, dtype=np.float64) / self.dt
        if steps.size == 0 or not (steps == steps.reshape(-1)[0]).all():
            _unsupported(n, node, "per-neuron delays differ; the IR delays a whole tensor")
        d = float(steps.reshape(-1)[0])
        if abs(d - round(d)) > 1e-9 * max(1.0, abs(d)) or d < 0:
            _unsupported(n, node, f"a delay of {d:g} steps of dt={self.dt:g} is not a whole number of steps",
                         "pass the --dt the file was written for")
        if round(d) == 0:
            return x
        return self.emit(n, "delay", [x], {"steps": int(round(d))})

    def node_Threshold(self, n, node, x):
        shape = self.ctx.type(x).shape
        theta = np.nextafter(self.channel(n, node, node.threshold, shape, "threshold"), np.inf)
        return self.lif(n, x, 0.0, 1.0, 0.0, theta)

    def node_LIF(self, n, node, x):
        shape, dt = self.ctx.type(x).shape, self.dt
        ch = lambda v, what: self.channel(n, node, v, shape, what)
        tau, r, v_leak, v_th, v_reset = (ch(node.tau, "tau"), ch(node.r, "r"), ch(node.v_leak, "v_leak"),
                                         ch(node.v_threshold, "v_threshold"), ch(node.v_reset, "v_reset"))
        self._nonzero(n, node, r)
        if self.scheme == "snntorch":
            gain = r * dt / tau
            return self.lif(n, x, 1 - dt / tau, 1.0, v_leak / r, np.nextafter(v_th / gain, np.inf), v_reset / gain)
        a = dt * (1 / tau)
        return self.lif(n, x, 1 - a, a * r, a * v_leak, np.nextafter(v_th, np.inf), v_reset)

    def node_IF(self, n, node, x):
        shape, dt = self.ctx.type(x).shape, self.dt
        ch = lambda v, what: self.channel(n, node, v, shape, what)
        r, v_th, v_reset = ch(node.r, "r"), ch(node.v_threshold, "v_threshold"), ch(node.v_reset, "v_reset")
        self._nonzero(n, node, r)
        if self.scheme == "snntorch":
            gain = r * dt
            return self.lif(n, x, 1.0, 1.0, 0.0, np.nextafter(v_th / gain, np.inf), v_reset / gain)
        return self.lif(n, x, 1.0, dt * r, 0.0, np.nextafter(v_th, np.inf), v_reset)

    def _li_params(self, n, node, shape):
        ch = lambda v, what: self.channel(n, node, v, shape, what)
        if kind(node) == "I":
            return 1.0, self.dt * ch(node.r, "r"), 0.0
        tau, r, v_leak = ch(node.tau, "tau"), ch(node.r, "r"), ch(node.v_leak, "v_leak")
        a = self.dt / tau
        return 1 - a, a * r, a * v_leak

    def node_LI(self, n, node, x):
        if n in self.patterns:
            return self._subtract(n, node, x)
        beta, alpha, bias = self._li_params(n, node, self.ctx.type(x).shape)
        return self.lif(n, x, beta, alpha, bias, NEVER, output="membrane")

    node_I = node_LI

    def _subtract(self, n, node, x):
        th_name, fb_name, w = self.patterns[n]
        shape = self.ctx.type(x).shape
        beta, alpha, bias = self._li_params(n, node, shape)
        th_node = self.nodes[th_name]
        theta = np.nextafter(self.channel(th_name, th_node, th_node.threshold, shape, "threshold"), np.inf)
        if kind(self.nodes[fb_name]) == "Conv2d" and len(shape) == 3:  # one weight per channel
            w = w.reshape(-1, 1, 1)
        w = self.channel(fb_name, self.nodes[fb_name], w, shape, "feedback weight")
        with np.errstate(divide="ignore", invalid="ignore"):
            amount = -alpha * w / beta
        if not np.allclose(amount, theta, rtol=1e-9, atol=0):
            _unsupported(fb_name, self.nodes[fb_name], f"the feedback removes {np.unique(amount)[:3]} per spike, "
                         f"not the threshold {np.unique(theta)[:3]}: not a subtract reset")
        spikes = self.lif(th_name, x, beta, alpha, bias, theta, reset="subtract")
        self.value[th_name] = spikes
        if any(d != th_name for d in self.outs(n)):
            return self.lif(n, x, beta, alpha, bias, theta, reset="subtract", output="membrane")
        return spikes  # only the Threshold reads the LI

    def _cuba(self, n, node, x, fire: bool):
        shape, dt = self.ctx.type(x).shape, self.dt
        ch = lambda v, what: self.channel(n, node, v, shape, what)
        tau_syn, tau_mem, r, v_leak, w_in = (ch(node.tau_syn, "tau_syn"), ch(node.tau_mem, "tau_mem"),
                                             ch(node.r, "r"), ch(node.v_leak, "v_leak"), ch(node.w_in, "w_in"))
        if fire and self.scheme == "snntorch" and not synaptic_misfits(node, dt):
            return self._synaptic(n, node, x, None)  # snnTorch's own Synaptic form: one op, Lava's CUBA neuron
        if fire and self.scheme == "snntorch":
            self._nonzero(n, node, r)
            self._nonzero(n, node, w_in)
            gs, gm = w_in * dt / tau_syn, r * dt / tau_mem
            v_th, v_reset = ch(node.v_threshold, "v_threshold"), ch(node.v_reset, "v_reset")
            syn = self.lif(f"{n}.syn", x, 1 - dt / tau_syn, 1.0, 0.0, NEVER, output="membrane")
            return self.lif(n, syn, 1 - dt / tau_mem, 1.0, v_leak / (r * gs), np.nextafter(v_th / (gm * gs), np.inf),
                            v_reset / (gm * gs))
        a_s, a_m = dt * (1 / tau_syn), dt * (1 / tau_mem)
        syn = self.lif(f"{n}.syn", x, 1 - a_s, a_s * w_in, 0.0, NEVER, output="membrane")
        if not fire:
            return self.lif(n, syn, 1 - a_m, a_m * r, a_m * v_leak, NEVER, output="membrane")
        v_th, v_reset = ch(node.v_threshold, "v_threshold"), ch(node.v_reset, "v_reset")
        return self.lif(n, syn, 1 - a_m, a_m * r, a_m * v_leak, np.nextafter(v_th, np.inf), v_reset)

    def node_CubaLIF(self, n, node, x):
        if n in self.cycles:
            bias = self.nodes[self.rec_bias[n]].bias if n in self.rec_bias else None
            return nir_cycles.read(self, n, node, x, self.cycles[n], bias)
        if n in self.recurrent:
            return self._synaptic(n, node, x, self.recurrent[n])
        return self._cuba(n, node, x, True)

    def _synaptic(self, n, node, x, u):
        """A CubaLIF in the snntorch scheme with zero ``v_leak`` and ``v_reset`` (``synaptic_misfits``), alone or
        fed back through a dense Affine/Linear ``u`` (``recurrent_cubalif_reason`` checked it): snnTorch's
        Synaptic / RSynaptic with a zero reset and no reset delay, the recurrence summed with the input first
        (``rec_add="input"``) as NIR sums a node's edges. ``alpha = 1 - dt/tau_syn``, ``beta = 1 - dt/tau_mem``,
        ``theta = v_th/(g_mem g_syn)`` with the interpreter's gains: its spike ``v > theta`` is RSynaptic's
        ``v - theta > 0``, and after the reset to 0 the delayed reset never fires again (``theta >= 0``)."""
        shape, dt = self.ctx.type(x).shape, self.dt
        full = lambda v, what: np.broadcast_to(self.channel(n, node, v, shape, what), (shape[0],)).copy()
        tau_syn, tau_mem, r, w_in, v_th = (full(node.tau_syn, "tau_syn"), full(node.tau_mem, "tau_mem"),
                                           full(node.r, "r"), full(node.w_in, "w_in"),
                                           full(node.v_threshold, "v_threshold"))
        gs, gm = w_in * dt / tau_syn, r * dt / tau_mem
        params = {"alpha": 1 - dt / tau_syn, "beta": 1 - dt / tau_mem, "threshold": v_th / (gm * gs)}
        attrs = {"reset": "zero", "reset_delay": False, "recurrent": "none", "nir_dt": dt, "nir_scheme": self.scheme}
        if u is not None:
            fb = self.nodes[u]
            params["weight"] = np.asarray(fb.weight, dtype=np.float64)
            if kind(fb) == "Affine":
                params["bias"] = np.asarray(fb.bias, dtype=np.float64)
            attrs.update(recurrent="linear", rec_add="input", nir_feedback=_ir_name(self.rename.get(u, u)))
        return self.emit(n, SYNAPTIC_SNNTORCH, [x], attrs, params)

    def node_CubaLI(self, n, node, x):
        return self._cuba(n, node, x, False)


def _spikec_names(graph: nir.NIRGraph) -> dict[str, str]:
    """NIR name -> IR name, from the metadata of a file spikec wrote (empty for any other file)."""
    import json
    meta = graph.metadata if isinstance(graph.metadata, dict) else {}
    raw = meta.get("spikec")
    fmt = meta.get("format")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if raw is None or fmt != "spikec-nir":
        return {}
    try:
        carriers = json.loads(raw.decode() if isinstance(raw, bytes) else str(raw)).get("carriers", {})
    except (ValueError, AttributeError):
        return {}
    return {v: k for k, v in carriers.items() if k != "input"}


def _input_shape(graph: nir.NIRGraph) -> tuple[str, tuple[int, ...]]:
    inputs = [(n, v) for n, v in graph.nodes.items() if isinstance(v, nir.Input)]
    if len(inputs) != 1:
        raise BadInput(f"the NIR graph has {len(inputs)} Input nodes; spikec compiles single-input graphs",
                       where="NIR graph")
    name, node = inputs[0]
    shape = node.input_type.get("input")
    if shape is None or np.asarray(shape).size == 0:
        raise BadInput("the Input node has no shape", where=f"NIR node {name!r} (Input)")
    return name, tuple(int(d) for d in np.atleast_1d(np.asarray(shape)))


def emit_nir(ctx: ConvertContext, graph: nir.NIRGraph, x: str, *, dt: float = DT, scheme: str = SCHEME,
             scope: str = "", allow_unstable: bool = False) -> list[str]:
    """Emit ``graph``'s IR into ``ctx`` reading its input from IR node ``x``; returns the output nodes."""
    name, _ = _input_shape(graph)
    return _Converter(ctx, graph, dt, scheme, scope, allow_unstable).run({name: x})


def load_nir(path, dt: float = DT, scheme: str = SCHEME, input_kind: str = "binary",
             ceiling: int | None = None, allow_unstable: bool = False) -> Graph:
    """The spikec IR of a ``.nir`` file, discretized at ``dt`` with ``scheme`` (verified); unstable neuron
    parameters are refused unless ``allow_unstable``. A file nir's strict type check refuses is read
    leniently (``conformance.read_nir``: types inferred, a ``lenient_read`` warning)."""
    graph, _ = read_nir(path)
    _, shape = _input_shape(graph)
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType(shape, input_kind, ceiling))
    ctx.nodes.append(node)
    ctx.types[node.name] = node.type
    outputs = emit_nir(ctx, graph, "input", dt=dt, scheme=scheme, allow_unstable=allow_unstable)
    meta = {"source": f"NIR file {Path(path).name}" if not isinstance(path, nir.NIRGraph) else "NIR graph",
            "nir": {"dt": dt, "scheme": scheme}}
    return verify(Graph(tuple(ctx.nodes), tuple(outputs), meta), "after reading the NIR file")


class NIRModel(nn.Module):
    """A ``.nir`` file as a model: forward runs spikec's NIR interpreter (float64) on ``[T, B, ...]``."""

    def __init__(self, path, dt: float = DT, scheme: str = SCHEME, allow_unstable: bool = False):
        super().__init__()
        if scheme not in SCHEMES:
            raise BadInput(f"unknown NIR scheme {scheme!r}", remedy=f"use one of {', '.join(SCHEMES)}")
        if not dt > 0:
            raise BadInput(f"--dt must be positive, got {dt}")
        self.path, self.dt, self.scheme = str(path), float(dt), scheme
        self.allow_unstable = bool(allow_unstable)
        self.graph, found = read_nir(path)  # lenient when nir's strict type check refuses the file
        self.input_name, self.input_shape = _input_shape(self.graph)
        self.output_names = [n for n, v in self.graph.nodes.items() if isinstance(v, nir.Output)]
        nodes, edges = inline(self.graph)
        schedule(nodes, edges)  # fail early on unreachable nodes
        # the conformance findings, for report.json's frontend.nir_diagnostics (computed before the refusals below)
        self.nir_diagnostics = found + nir_diagnostics(self.graph, self.dt, scheme)
        for f in found:
            warnings.warn(f"{self.path}: {f['message']}", stacklevel=2)
        check_stability(nodes, self.dt, scheme, self.allow_unstable)  # before forward runs a growing membrane

    def forward(self, x: torch.Tensor):
        run = interpreter.run(self.graph, {self.input_name: x.detach().double().numpy()}, dt=self.dt,
                              scheme=self.scheme, record=self.output_names)
        outs = tuple(torch.as_tensor(run.values[n]) for n in self.output_names)
        return outs[0] if len(outs) == 1 else outs

    def extra_repr(self) -> str:
        return f"{self.path}, dt={self.dt:g}, scheme={self.scheme!r}" + (", allow_unstable" if self.allow_unstable
                                                                          else "")


def nir_model(path, dt: float = DT, scheme: str = SCHEME, allow_unstable: bool = False) -> NIRModel:
    """The driver's hook for a MODEL ending in ``.nir``; ``allow_unstable`` is the CLI's ``--allow-unstable``."""
    return NIRModel(path, dt, scheme, allow_unstable)


def _convert(ctx, module: NIRModel, name, x):
    require_stepping(ctx, module, name, "multistep")  # a NIR graph runs whole sequences [T, B, ...]
    outs = emit_nir(ctx, module.graph, x, dt=module.dt, scheme=module.scheme, scope=name,
                    allow_unstable=getattr(module, "allow_unstable", False))
    return outs[0] if len(outs) == 1 else tuple(outs)


register_converter(NIRModel, _convert)
