"""NIR import conformance: read a ``.nir`` file leniently when nir's strict type check refuses it, and list
per node what in the file would make a discretized run (spikec's, or a consumer's) differ from NIR's ODEs.

``read_nir(path)`` -> ``(graph, findings)``: ``nir.read`` (strict, nir 1.0.8); when that raises, the file is
read again with ``type_check=False`` in every nested graph and the node types are inferred from the
Input shape and the weights (a ``lenient_read`` warning, and one ``type_inferred`` per corrected node).

``nir_diagnostics(graph, dt, scheme)`` -> ``[{node, kind, severity, message}]``. ``severity`` is
``error`` (the file is unusable as is: spikec refuses it, or it is malformed), ``warning`` (a consumer's
known behaviour changes spikes, or a parameter is suspicious) or ``info``. The consumers' behaviours were
read from the installed sources: snnTorch 1.0.0 (``snntorch/import_nir.py``), Norse 1.1.0
(``norse/torch/utils/import_nir.py``, ``export_nir.py``) and nirtorch 2.6 (``nirtorch/nir_interpreter.py``).

``check_file(path, dt, scheme)`` is ``spikec nir-check``: the findings plus whether spikec's frontend
compiles the file; ``exit_code(findings)`` is 1 when one is an error, else 0 (bad input raises BadInput: 2).
"""
import numpy as np

import nir

from spikec.ir.errors import BadInput
from spikec.formats.nir import hdf5
from spikec.formats.nir.interpreter import SCHEMES, SUPPORTED, kind

NEURON_TAUS = {"LIF": ("tau",), "LI": ("tau",), "CubaLIF": ("tau_syn", "tau_mem"), "CubaLI": ("tau_syn", "tau_mem")}
SHAPE_SAME = ("LIF", "LI", "IF", "I", "CubaLIF", "CubaLI", "Scale", "Threshold", "Delay", "Output")
SNNTORCH_DT = 1e-4  # snntorch/import_nir.py hard-codes dt = 1e-4 for LIF and CubaLIF
ERROR, WARNING, INFO = "error", "warning", "info"


def finding(node: str, kind_: str, severity: str, message: str) -> dict:
    return {"node": node, "kind": kind_, "severity": severity, "message": message}


# -- reading -------------------------------------------------------------------------------------------

def read_nir(source) -> tuple[nir.NIRGraph, list[dict]]:
    """The graph of a ``.nir`` path (or a NIRGraph, as given) and the findings of reading it: none when
    nir's strict reader accepts it; else a lenient read with inferred types and a ``lenient_read`` warning."""
    from pathlib import Path
    if isinstance(source, nir.NIRGraph):
        return source, []
    path = Path(source)
    if not path.is_file():
        raise BadInput(f"NIR file {str(path)!r} does not exist")
    hdf5.check_file(path)  # every array inside the file, for the strict and the lenient read alike
    try:
        return nir.read(path), []
    except Exception as strict:  # nir raises ValueError, KeyError, AssertionError ... on a file it rejects
        graph = _read_unchecked(path, strict)
        found = [finding("graph", "lenient_read", WARNING,
                         "nir's strict read refused the file "
                         f"({type(strict).__name__}: {strict}); read with type_check=False and the node types "
                         "inferred from the Input shape and the weights")]
        return graph, found + infer_types(graph)


def _read_unchecked(path, strict: Exception) -> nir.NIRGraph:
    import h5py
    from nir.serialization import hdf2dict
    try:
        with h5py.File(path, "r") as f:
            data = hdf2dict(f["node"])
        _no_type_check(data)
        return nir.dict2NIRNode(data)
    except Exception as e:
        raise BadInput(f"{str(path)!r} is not a readable NIR file: {type(strict).__name__}: {strict} (and read "
                       f"without the type check: {type(e).__name__}: {e})",
                       remedy="write it with nir.write (nir 1.0.8)") from e


def _no_type_check(data: dict) -> None:
    """nir's reader passes ``type_check`` to the top graph only; a nested graph would still be checked."""
    if data.get("type") == "NIRGraph":
        data["type_check"] = False
        for sub in data.get("nodes", {}).values():
            if isinstance(sub, dict):
                _no_type_check(sub)


def _declared(node, key: str):
    types = getattr(node, f"{key}_type", None)
    value = None if not isinstance(types, dict) else types.get(key)
    if value is None or np.asarray(value).size == 0:
        return None
    return tuple(int(d) for d in np.atleast_1d(np.asarray(value)))


def _out_shape(node, shape: tuple) -> tuple | None:
    from nir.ir.utils import calc_flatten_output, calculate_conv_output
    k = kind(node)
    if k == "Input":
        return _declared(node, "input")
    if k in SHAPE_SAME:
        return shape
    if k in ("Affine", "Linear"):
        return shape[:-1] + (int(np.asarray(node.weight).shape[0]),)
    if k == "Conv2d":
        w = np.asarray(node.weight)
        out = calculate_conv_output(shape[1:], node.padding, node.dilation, w.shape[2:], node.stride)
        return (int(w.shape[0]),) + tuple(int(d) for d in np.atleast_1d(out))
    if k in ("SumPool2d", "AvgPool2d"):
        out = calculate_conv_output(shape[1:], node.padding, 1, node.kernel_size, node.stride)
        return (shape[0],) + tuple(int(d) for d in np.atleast_1d(out))
    if k == "Flatten":
        return tuple(int(d) for d in np.atleast_1d(calc_flatten_output(np.asarray(shape), node.start_dim,
                                                                       node.end_dim)))
    return None


def infer_types(graph: nir.NIRGraph, prefix: str = "") -> list[dict]:
    """Set every node's input/output type from the Input shapes forward (weights for Affine/Linear/conv,
    nir's own formulas for conv, pooling and Flatten); one ``type_inferred`` warning per changed node."""
    found, shapes = [], {}
    todo = [n for n, v in graph.nodes.items() if kind(v) == "Input"]
    for n in todo:
        shapes[n] = _declared(graph.nodes[n], "input")
    while todo:
        src = todo.pop(0)
        for s, d in graph.edges:
            node = graph.nodes.get(d)
            if s != src or node is None or d in shapes or shapes.get(s) is None or isinstance(node, nir.NIRGraph):
                continue
            try:
                out = _out_shape(node, shapes[s])
            except (ValueError, TypeError, IndexError):
                out = None
            shapes[d] = out
            found += _set_types(prefix + d, node, shapes[s], out)
            todo.append(d)
    for n, node in graph.nodes.items():
        if isinstance(node, nir.NIRGraph):
            found += infer_types(node, f"{prefix}{n}.")
    return found


def _set_types(name, node, shape_in, shape_out) -> list[dict]:
    old = (_declared(node, "input"), _declared(node, "output"))
    new_in = shape_in if shape_in is not None else old[0]
    new_out = shape_out if shape_out is not None else old[1]
    if (new_in, new_out) == old:
        return []
    node.input_type = {"input": None if new_in is None else np.array(new_in)}
    node.output_type = {"output": None if new_out is None else np.array(new_out)}
    return [finding(name, "type_inferred", WARNING, f"declared input/output shapes {old[0]} -> {old[1]} replaced by "
                    f"the shapes its producer and weights give, {new_in} -> {new_out}")]


# -- diagnostics ---------------------------------------------------------------------------------------

def flatten(graph: nir.NIRGraph, prefix: str = "") -> tuple[dict, list, list[dict]]:
    """(nodes, edges) with nested graphs' nodes named ``outer.inner``, and a ``dangling_edge`` error per
    edge naming a node that is not in its graph (without raising, unlike nir's and spikec's readers)."""
    nodes, edges, found = {}, [], []
    for name, node in graph.nodes.items():
        if isinstance(node, nir.NIRGraph):
            sub_nodes, sub_edges, sub_found = flatten(node, f"{prefix}{name}.")
            nodes.update(sub_nodes)
            edges += sub_edges
            found += sub_found
        else:
            nodes[prefix + name] = node
    named = {x for e in graph.edges for x in e}
    for missing in sorted(named - set(graph.nodes)):
        bad = [e for e in graph.edges if missing in e]
        unnamed = sorted(n for n in graph.nodes if n not in named)
        hint = f"; no edge names the node(s) {unnamed}, perhaps the one meant" if unnamed else ""
        found.append(finding(prefix.rstrip(".") or "graph", "dangling_edge", ERROR,
                             f"{len(bad)} edge(s) ({', '.join(map(str, bad[:4]))}) name {missing!r}, which is not a node "
                             f"of this graph{hint}"))
    edges += [(prefix + s, prefix + d) for s, d in graph.edges]
    return nodes, edges, found


def nir_diagnostics(graph: nir.NIRGraph, dt: float, scheme: str) -> list[dict]:
    """Every finding on ``graph`` read at ``dt`` in ``scheme`` (see the module doc), the discretization first."""
    if scheme not in SCHEMES:
        raise BadInput(f"unknown NIR scheme {scheme!r}", remedy=f"use one of {', '.join(SCHEMES)}")
    if not (isinstance(dt, (int, float)) and np.isfinite(dt) and dt > 0):
        raise BadInput(f"--dt must be a positive number, got {dt!r}")
    dt = float(dt)
    found = [finding("graph", "discretization", INFO,
                     f"read at dt = {dt:g} s in scheme {scheme!r} (NIR has no time step: the file's meaning "
                     "depends on this choice)")]
    nodes, edges, dangling = flatten(graph)
    found += dangling
    for name, node in nodes.items():
        for check in (_check_kind, _check_shape, _check_bias, _check_taus, _check_r, _check_if,
                      _check_snntorch_cuba, _check_norse_tau):
            found += check(name, node, dt)
    return found + _check_cycle_bias(nodes, edges)


def _check_cycle_bias(nodes: dict, edges: list) -> list[dict]:
    """A biased Affine on a cycle: its first-step value is read differently by the consumers."""
    from spikec.formats.nir.interpreter import schedule
    if not any(kind(v) == "Input" for v in nodes.values()):
        return []
    try:
        _, back = schedule(nodes, edges)
    except BadInput:
        return []   # unreachable nodes: reported by the frontend
    return [finding(src, "cycle_bias_first_step", WARNING,
                    f"the recurrence {src!r} -> {dst!r} carries a bias ({_show(nodes[src].bias)}): at the first step "
                    "spikec and snnTorch 1.0.0 (RSynaptic/RLeaky: rec(0) = bias) give it the bias, its value at "
                    "rest, while nirtorch-based importers (Norse 1.1.0) read a cycle's edge as 0 there: the first "
                    "step's input differs by the bias")
            for src, dst in sorted(back)
            if not isinstance(nodes[src], tuple) and kind(nodes[src]) == "Affine"
            and np.any(np.asarray(nodes[src].bias) != 0)]


def _check_kind(name, node, dt) -> list[dict]:
    if kind(node) in SUPPORTED:
        return []
    return [finding(name, "unsupported_node", ERROR, f"NIR node type {kind(node)} has no meaning in spikec")]


def _check_shape(name, node, dt) -> list[dict]:
    k = kind(node)
    if k == "Input" and _declared(node, "input") is None:
        return [finding(name, "missing_shape", ERROR, "the Input node has no shape: nothing fixes the graph's "
                        "sizes (give the Input a shape)")]
    if k == "Output" or (_declared(node, "input") is not None and _declared(node, "output") is not None):
        return []
    return [finding(name, "missing_shape", WARNING, "the node has no declared input/output shape; spikec infers it "
                    "from its producer, a consumer that reads the declared type (nirtorch) may not")]


def _check_bias(name, node, dt) -> list[dict]:
    k = kind(node)
    if k not in ("Affine", "Conv1d", "Conv2d"):
        return []
    w = np.asarray(node.weight)
    bias = getattr(node, "bias", None)
    b = None if bias is None else np.asarray(bias, dtype=np.float64)
    if b is None or b.size == 0 or b.shape != (w.shape[0],) and b.size != 1:
        return [finding(name, "bias_dropped", ERROR, f"the bias has shape {None if b is None else b.shape}, not "
                        f"({w.shape[0]},): it cannot be added to the node's {w.shape[0]} outputs")]
    found = []
    if not np.any(b):
        found.append(finding(name, "zero_bias", INFO, f"the {k} bias is all zeros (a Linear would say the same)"))
    if k == "Affine":
        found.append(finding(name, "nirtorch_affine_bias", WARNING,
                             "a consumer using nirtorch 2.6's default Affine mapping (nir_interpreter."
                             "_default_map_affine) sets module.weight.bias instead of module.bias: the file's bias is "
                             "dropped and torch's random initial bias is added, which changes spikes (snnTorch 1.0.0 "
                             "and Norse 1.1.0 map Affine themselves and load the bias)"))
    return found


def _decay(tau, dt, scheme):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return 1 - dt / tau if scheme == "snntorch" else 1 - dt * (1 / tau)


def _check_taus(name, node, dt) -> list[dict]:
    found = []
    for param in NEURON_TAUS.get(kind(node), ()):
        tau = np.asarray(getattr(node, param), dtype=np.float64)
        if tau.size == 0:
            found.append(finding(name, "missing_shape", ERROR, f"{param} is empty"))
            continue
        if np.any(~(tau > 0)):
            bad = float(tau.reshape(-1)[np.argmax(~(tau > 0).reshape(-1))])
            found.append(finding(name, "negative_tau", ERROR, f"{param} = {bad:g} is not a positive time constant: "
                                 "the membrane grows every step (spikec refuses it unless --allow-unstable)"))
            continue
        decay = _decay(tau, dt, "snntorch")
        if np.any(decay < 0):
            found.append(finding(name, "dt_over_tau", ERROR,
                                 f"{param} = {float(tau.min()):g} < dt = {dt:g}: the decay 1 - dt/{param} = "
                                 f"{float(decay.min()):g} is outside (0, 1], the discretized neuron flips sign every "
                                 f"step (spikec refuses it unless --allow-unstable; use --dt <= {float(tau.min()):g})"))
        elif np.any(decay == 0) and (kind(node), param) == ("CubaLIF", "tau_mem"):
            found.append(finding(name, "zero_decay", WARNING,
                                 f"{param} = dt = {dt:g}: the decay 1 - dt/{param} is 0, the membrane is the synaptic "
                                 "current each step and fires on it (the form spikec writes for a subtract reset; at "
                                 "another dt, or in NIR's ODE, it is a different neuron)"))
        elif np.any(decay == 0):
            found.append(finding(name, "zero_decay", WARNING,
                                 f"{param} = dt = {dt:g}: the decay 1 - dt/{param} is 0, the state forgets everything "
                                 "each step (a discretization artefact, not NIR's ODE)"))
    return found


def _check_r(name, node, dt) -> list[dict]:
    k = kind(node)
    if k not in ("LIF", "IF", "LI", "I", "CubaLIF", "CubaLI") or np.all(np.asarray(node.r) == 1):
        return []
    r = np.asarray(node.r, dtype=np.float64)
    if k in ("CubaLIF", "CubaLI"):
        return [finding(name, "r_not_one", INFO, f"r = {_show(r)} (Norse 1.1.0 multiplies the synaptic current by r; "
                        "snnTorch 1.0.0 requires r = tau_mem/dt, see snntorch_cubalif_threshold)")]
    if k in ("LI", "I"):
        return [finding(name, "r_not_one", INFO, f"r = {_show(r)} scales the input")]
    why = ("snnTorch 1.0.0 folds r into the LIF threshold (v_threshold/(r dt/tau))" if k == "LIF"
           else "snnTorch 1.0.0 raises on an IF with r != 1")
    return [finding(name, "r_not_one", WARNING, f"r = {_show(r)}: Norse 1.1.0's from_nir ignores r for {k} (it only "
                    f"warns; norse/torch/utils/import_nir.py), so its spikes differ from the file's; {why}")]


def _check_if(name, node, dt) -> list[dict]:
    if kind(node) != "IF":
        return []
    gain = np.asarray(node.r, dtype=np.float64) * dt
    norse = ("" if np.allclose(gain, 1, rtol=1e-12, atol=0) else
             f"; Norse 1.1.0's IAFCell adds the input unscaled (v += x), not r*dt*x = {_show(gain)}*x")
    return [finding(name, "if_as_leaky", WARNING,
                    "snnTorch 1.0.0's import_from_nir reads IF as snn.Leaky(beta=0.9): a neuron that loses 10% of its "
                    "membrane every step instead of integrating, so its spikes change (not beta = 0 as sometimes "
                    f"reported; spikec reads it as beta = 1){norse}")]


def _check_snntorch_cuba(name, node, dt) -> list[dict]:
    if kind(node) != "CubaLIF":
        return []
    r, tau_mem = np.asarray(node.r, dtype=np.float64), np.asarray(node.tau_mem, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        gm = r * SNNTORCH_DT / tau_mem
    gs = np.asarray(node.w_in, dtype=np.float64) * SNNTORCH_DT / np.asarray(node.tau_syn, dtype=np.float64)
    if np.all(gm == 1) and dt == SNNTORCH_DT:
        return []
    accepted = bool(np.allclose(r, tau_mem / SNNTORCH_DT))
    off = float(np.max(np.abs(gm - 1))) if np.all(np.isfinite(gm)) else float("inf")
    fate = (f"it asserts r == tau_mem/dt with np.allclose, which this file passes, so the threshold is off by up to "
            f"{off:.3g} relative: a membrane within that margin of v_threshold spikes differently" if accepted else
            f"it asserts r == tau_mem/dt (np.allclose), which fails here (r dt/tau_mem = {_show(gm)}): the import raises")
    at_dt = "" if dt == SNNTORCH_DT else f"; and it discretizes at dt = 1e-4, not at dt = {dt:g}"
    minor = accepted and dt == SNNTORCH_DT and off < 1e-7  # below float32 resolution: snnTorch cannot tell
    return [finding(name, "snntorch_cubalif_threshold", INFO if minor else WARNING,
                    "snnTorch 1.0.0's import_from_nir divides v_threshold by the synaptic gain w_in dt/tau_syn "
                    f"(= {_show(gs)} at dt = 1e-4) only, never by the membrane gain r dt/tau_mem; {fate}{at_dt}")]


def _check_norse_tau(name, node, dt) -> list[dict]:
    """Norse 1.1.0's to_nir writes tau = dt/tau_mem_inv (= dt*tau_mem) with r = 1 (export_nir.py)."""
    k = kind(node)
    if k not in ("LIF", "LI", "CubaLIF") or not np.all(np.asarray(node.r) == 1):
        return []
    params = NEURON_TAUS[k]
    taus = [np.asarray(getattr(node, p), dtype=np.float64) for p in params]
    if not any(np.any((t > 0) & (t < dt)) for t in taus):
        return []
    guess = ", ".join(f"{p} = {_show(t)}" for p, t in zip(params, taus))
    return [finding(name, "norse_tau_convention", WARNING,
                    f"{guess} with r = 1, below dt = {dt:g}: what Norse 1.1.0's to_nir writes "
                    "(norse/torch/utils/export_nir.py: tau = dt/tau_mem_inv, i.e. dt*tau_mem, not tau_mem). If the file "
                    "came from Norse 1.1, the intended time constant is tau/dt_export; read as written, every step "
                    "flips the sign of the membrane")]


def _show(a) -> str:
    a = np.unique(np.asarray(a, dtype=np.float64))
    return f"{a[0]:.9g}" if a.size == 1 else f"[{', '.join(f'{v:.6g}' for v in a[:3])}{', ...' if a.size > 3 else ''}]"
