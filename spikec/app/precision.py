"""Precision honesty: how far the source model, run as it was trained, is from the float64 model spikec proves.

snnTorch, SpikingJelly and Norse train and run in float32; spikec proves the deployed graph equal to the source
model run in float64 (``checker.run_torch`` calls ``.double()``). ``source_precision`` runs the model once more
in its *own* parameter dtype (a deep copy, inputs cast to that dtype) and compares every output with the float64
reference: spike outputs value by value (a flip is a float32 membrane landing on the other side of a threshold),
real outputs within ``REL_TOL[dtype]`` of the output's largest float64 magnitude. It never raises: a source run
that fails in its own dtype is reported as ``{"dtype", "error"}``. The model and torch's global state (default
dtype, random number generators) are left as they were.

``flip_margins(report, graph, trace)`` adds to each reported disagreement of a spike output the float64 firing
margin ``|U - boundary|`` the IR's run recorded there (how close the proven model was to the threshold).
"""
import copy
import random

import numpy as np
import torch

from spikec.core.checker import REL_TOL as FLOAT64_REL_TOL
from spikec.core.interpreter import Trace
from spikec.ir.graph import Graph

# a real output agrees when |float64 - source| <= REL_TOL * max |float64| of that output
REL_TOL = {torch.float64: FLOAT64_REL_TOL, torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-1}
FIRST = 5  # disagreements listed per output


def source_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype the model computes in: the lowest-precision floating dtype of its parameters and buffers
    (what torch's type promotion lands on), or torch's default dtype when it holds none."""
    found = {t.dtype for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()}
    if not found:
        return torch.get_default_dtype()
    return max(found, key=lambda d: torch.finfo(d).eps)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def source_precision(model: torch.nn.Module, inputs, reference_outputs, run_source=None) -> dict:
    """Compare the model run in its own dtype with ``reference_outputs`` (its float64 outputs, ``run_torch``'s
    list of ``[T, B, ...]`` arrays) on ``inputs`` (``[T, B, ...]``).

    ``run_source(model, x)`` runs the copied model on the cast input tensor and returns a tensor or a tuple or
    list of tensors (default: ``model(x)``); output ``i`` is compared with ``reference_outputs[i]``.
    """
    dtype = torch.get_default_dtype()
    try:
        dtype = source_dtype(model)
        got = _run(model, inputs, dtype, run_source)
        reference = [np.asarray(r, dtype=np.float64) for r in reference_outputs]
        if len(got) != len(reference):
            raise ValueError(f"the {_name(dtype)} run returned {len(got)} outputs, the float64 reference "
                             f"{len(reference)}")
        tol = REL_TOL.get(dtype, 100 * torch.finfo(dtype).eps)
        outputs = [_compare(i, r, g, tol) for i, (r, (g, _)) in enumerate(zip(reference, got))]
        has_params = any(t.is_floating_point() for t in (*model.parameters(), *model.buffers()))
    except Exception as e:  # the report must never fail on a model that runs in float64
        return {"dtype": _name(dtype), "error": f"{type(e).__name__}: {e}"}
    n = sum(o["values"] for o in outputs)
    k = sum(o["disagreements"] for o in outputs)
    report = {"dtype": _name(dtype), "rel_tol": tol,
              "tolerance": "spike outputs: identical values; real outputs: |float64 - source| <= rel_tol * "
                           "max |float64| of the output",
              "output_dtypes": [_name(d) for _, d in got],
              "outputs": outputs, "values": n, "disagreements": k, "agreement": 1.0 - k / n if n else 1.0}
    report["explanation"] = _explain(report, has_params)
    return report


def _run(model, inputs, dtype, run_source) -> list[tuple[np.ndarray, torch.dtype]]:
    """The copied model's outputs on ``inputs`` cast to ``dtype``, as float64 arrays with their own dtypes;
    torch's default dtype and the random generators (torch, numpy, random) restored afterwards."""
    default, rng = torch.get_default_dtype(), torch.random.get_rng_state()
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        source = copy.deepcopy(model).eval()
        x = torch.as_tensor(np.asarray(inputs)).to(dtype)
        with torch.no_grad():
            out = run_source(source, x) if run_source is not None else source(x)
    finally:
        torch.set_default_dtype(default)
        torch.random.set_rng_state(rng)
        np.random.set_state(np_state)
        random.setstate(py_state)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"output {i} of the source run is a {type(o).__name__}, not a tensor")
    return [(o.detach().cpu().to(torch.float64).numpy(), o.dtype) for o in outs]


def _is_spike(r: np.ndarray) -> bool:
    """Spikes {0, 1} or integer spike counts: every value a non-negative integer."""
    return bool(np.all((r >= 0) & (r == np.round(r))))


def _num(v: float):
    return float(v) if np.isfinite(v) else str(float(v))  # JSON has no NaN or Inf


def _compare(i: int, r: np.ndarray, g: np.ndarray, rel_tol: float) -> dict:
    if r.shape != g.shape:
        raise ValueError(f"output {i}: the source run gives shape {tuple(g.shape)}, the float64 reference "
                         f"{tuple(r.shape)}")
    spike = _is_spike(r)
    finite = np.isfinite(g)
    diff = np.abs(np.where(finite, g, 0.0) - r)
    scale = float(np.abs(r).max(initial=0.0))
    tol = 0.0 if spike else rel_tol * scale
    bad = (diff > tol) | ~finite
    k = int(bad.sum())
    first = [{"step": int(p[0]), "index": [int(j) for j in p[1:]], "float64": _num(r[tuple(p)]),
              "source": _num(g[tuple(p)])} for p in np.argwhere(bad)[:FIRST]]
    out = {"output": i, "spike": spike, "values": int(r.size), "disagreements": k,
           "agreement": 1.0 - k / r.size if r.size else 1.0,
           "max_abs_diff": float(diff[finite].max(initial=0.0)), "tolerance": tol, "first": first}
    if not finite.all():
        out["non_finite"] = int((~finite).sum())
    return out


def _explain(report: dict, has_params: bool) -> str:
    dtype, n, k = report["dtype"], report["values"], report["disagreements"]
    flips = sum(o["disagreements"] for o in report["outputs"] if o["spike"])
    reals = k - flips
    if dtype == "float64":
        return (f"The model's parameters are float64: it runs in the precision spikec proves in. Its own run "
                f"agrees with the float64 reference on {n - k} of {n} output values.")
    held = "" if has_params else " The model holds no floating-point parameters; it was run on " \
        f"{dtype} inputs."
    if all(d == "float64" for d in report["output_dtypes"]):
        held += f" Its outputs are float64 although its inputs were {dtype}: it computes in float64 itself."
    head = (f"The frameworks train and run in {dtype}; spikec proves the deployed graph equal to the source "
            f"model run in float64.{held} Run in {dtype}, the source model ")
    if k == 0:
        return head + (f"agrees with that float64 run on all {n} output values (spikes identical, real values "
                       f"within {report['rel_tol']:g} of each output's largest magnitude): the proof speaks for "
                       f"the {dtype} model on these inputs too.")
    parts = []
    if flips:
        parts.append(f"{flips} spike{'s' if flips != 1 else ''} flip (a {dtype} membrane lands on the other side "
                     f"of a threshold than the float64 one: rounding of the inputs, weights or membrane sums)")
    if reals:
        parts.append(f"{reals} real value{'s' if reals != 1 else ''} differ by more than {report['rel_tol']:g} "
                     f"of the output's largest magnitude")
    return head + (f"disagrees with that float64 run on {k} of {n} output values (agreement "
                   f"{100 * report['agreement']:.4g}%): {' and '.join(parts)}. The deployed graph is proven "
                   f"equal to the float64 model, not to the {dtype} one: it differs from the model as trained "
                   f"by as much. The firing margins show how close the float64 neurons came to their thresholds.")


def flip_margins(report: dict, graph: Graph, trace: Trace) -> dict:
    """A copy of ``report`` whose listed disagreements of spike outputs carry ``"margin"``: the float64 firing
    margin ``|U - boundary|`` of the output neuron at that step and index, from ``trace`` (the IR's run on the
    same inputs; output ``i`` is ``graph.outputs[i]``). Outputs that are not neurons, or whose run is on
    sub-steps, are left as they are. A flip inherited from an earlier layer can show a large margin here."""
    report = copy.deepcopy(report)
    for o in report.get("outputs", ()):
        name = graph.outputs[o["output"]] if o["output"] < len(graph.outputs) else None
        margin = trace.margins.get(name) if name is not None and o["spike"] else None
        if margin is None or graph.node(name).type.substeps != 1:
            continue
        for entry in o["first"]:
            at = (entry["step"], *entry["index"])
            if len(at) == margin.ndim and all(0 <= a < s for a, s in zip(at, margin.shape)):
                entry["margin"] = float(margin[at])
    return report
