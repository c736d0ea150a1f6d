"""Equivalence checker (semantics.md section 4).

Spike tensors must be identical at every step; real tensors must agree within ``REL_TOL``
relative to the tensor's largest magnitude, in float64 (an output the source itself holds in float32 within
``F32_REL_TOL``, named in the summary). Mismatches are reported by node,
step, index and firing margin ``|U - boundary|`` so a true bug is told apart from a tie.

Across passes a node name denotes the same value: a pass that replaces a node keeps the name
on the node that now computes that value, so surviving names are compared one to one.
"""
from dataclasses import dataclass, field

import numpy as np
import torch

from spikec.ir.errors import BadInput, SpikecError
from spikec.core.interpreter import Trace, read_last_nodes, run
from spikec.ir.graph import Graph

REL_TOL = 1e-9
# a source output the model itself holds in float32 even run in float64 (Norse's ConvNet tutorial records its
# voltages in torch.zeros(T, B, 10, dtype=torch.float)): its values are rounded to float32 there, so the float64
# graph is compared with it within float32's rounding (2 units of its 24-bit precision), named in ``float32_outputs``
F32_REL_TOL = 2.0 ** -22
MAX_REPORTED = 10
BLOCK = 1 << 15   # values per block of the real-value rule's reading (256 kB of float64 a block: within L2)


@dataclass(frozen=True)
class Mismatch:
    node: str
    step: int
    index: tuple
    expected: float
    got: float
    margin: float | None  # firing margin at that spot, when the node is a neuron

    def to_json(self) -> dict:
        return {"node": self.node, "step": self.step, "index": list(self.index), "expected": self.expected,
                "got": self.got, "margin": self.margin}


@dataclass
class Comparison:
    nodes_compared: list[str] = field(default_factory=list)
    spikes_compared: int = 0
    values_compared: int = 0
    spike_mismatches: int = 0
    real_mismatches: int = 0
    max_rel_diff: float = 0.0
    mismatches: list[Mismatch] = field(default_factory=list)
    nans_matched: int = 0     # NaN on both sides at the same place (reported when any: a proof over NaNs)
    float32_outputs: list[str] = field(default_factory=list)   # compared within F32_REL_TOL: the source's float32
    # which expected arrays may take the float32 rule: None, any float32 one (the source run here); else these names
    # (verify: the outputs report.json says the source held in float32, never an io.npz's dtype alone)
    float32_allowed: frozenset | None = None

    @property
    def equivalent(self) -> bool:
        return self.spike_mismatches == 0 and self.real_mismatches == 0

    def add(self, node: str, expected: np.ndarray, got: np.ndarray, spike: bool, margin=None) -> None:
        if _same_values(expected, got):  # one array seen twice (a value a pass's run took from the run before)
            return self.add_self(node, got, spike, margin)
        self._add(node, expected, got, spike, margin)

    def _add(self, node: str, expected: np.ndarray, got: np.ndarray, spike: bool, margin=None) -> None:
        self.nodes_compared.append(node)
        tol = REL_TOL
        if not spike and getattr(expected, "dtype", None) == np.float32 \
                and (self.float32_allowed is None or node in self.float32_allowed):
            tol = F32_REL_TOL
            self.float32_outputs.append(node)
        if expected.shape != got.shape:
            self.real_mismatches += 1
            self.mismatches.append(Mismatch(node, -1, tuple(got.shape), float("nan"), float("nan"), None))
            return
        expected, got = np.asarray(expected, dtype=np.float64), np.asarray(got, dtype=np.float64)
        if not spike and np.array_equal(expected, got):
            # identical values (the interpreter repeats the source's arithmetic, and a pass leaves most values as
            # they were): every difference is 0, so the rule below would add nothing but the count; one pass over
            # the data instead of its seven. NaN != NaN: an array holding one takes the rule below.
            self.values_compared += expected.size
            return
        if spike:
            bad = expected != got
            n_bad = int(np.count_nonzero(bad))
            self.spikes_compared += expected.size
            self.spike_mismatches += n_bad
        elif (found := _finite_rule(expected, got)) is not None:  # the rule below, without its masks and copies
            ranges, largest = found
            scale = max(*ranges, np.finfo(float).tiny)
            # division by scale > 0, correctly rounded, is monotone: max(|d| / scale) is max|d| / scale, and when
            # that is within REL_TOL no value is out (the per-value quotients are made only when one may be)
            worst = float(largest / scale)
            self.max_rel_diff = max(self.max_rel_diff, worst)
            if worst > tol:
                with np.errstate(over="ignore"):
                    diff = np.subtract(expected, got)
                np.abs(diff, out=diff)
                diff /= scale
                bad = diff > tol
                n_bad = int(np.count_nonzero(bad))
            else:
                n_bad = 0
            self.values_compared += expected.size
            self.real_mismatches += n_bad
        else:  # relative to the largest finite magnitude; a NaN or Inf matches only the identical value (a NaN
            # matches a NaN at the same place: the source computed it there too, e.g. sqrt of a negative a torch.where
            # then masks away; nans_matched counts them so a run of NaNs is visible, not silently "equal")
            finite = np.isfinite(expected) & np.isfinite(got)
            scale = max(np.abs(expected[finite]).max(initial=0.0), np.abs(got[finite]).max(initial=0.0),
                        np.finfo(float).tiny)
            with np.errstate(invalid="ignore", over="ignore"):
                diff = np.where(finite, np.abs(np.where(finite, expected - got, 0.0)) / scale, 0.0)
            self.max_rel_diff = max(self.max_rel_diff, float(diff.max(initial=0.0)))
            both_nan = np.isnan(expected) & np.isnan(got)
            bad = (diff > tol) | (~finite & (expected != got) & ~both_nan)
            n_bad = int(bad.sum())
            self.nans_matched += int(both_nan.sum())
            self.values_compared += expected.size
            self.real_mismatches += n_bad
        room = max(0, MAX_REPORTED - len(self.mismatches))
        for pos in np.argwhere(bad)[:room] if n_bad and room else ():
            pos = tuple(int(i) for i in pos)
            m = None if margin is None else float(margin[pos])
            self.mismatches.append(Mismatch(node, pos[0], pos[1:], float(expected[pos]), float(got[pos]), m))

    def add_self(self, node: str, value: np.ndarray, spike: bool, margin=None) -> None:
        """``add(node, value, value, spike, margin)`` (a run compared with itself), without the arithmetic unless
        ``value`` holds a NaN: only a NaN differs from itself, every relative difference is 0."""
        value = np.asarray(value, dtype=np.float64)
        if value.size and np.isnan(value.min()):  # a NaN propagates through min: one pass, no mask
            return self._add(node, value, value, spike, margin)
        self.nodes_compared.append(node)
        if spike:
            self.spikes_compared += value.size
        else:
            self.values_compared += value.size
            self.max_rel_diff = max(self.max_rel_diff, 0.0)

    def summary(self) -> dict:
        return {"equivalent": self.equivalent, "nodes_compared": len(self.nodes_compared),
                "spikes_compared": self.spikes_compared, "values_compared": self.values_compared,
                "spike_mismatches": self.spike_mismatches, "real_mismatches": self.real_mismatches,
                "max_rel_diff": self.max_rel_diff, "first_mismatches": [m.to_json() for m in self.mismatches],
                **({"nans_matched": self.nans_matched} if self.nans_matched else {}),
                **({"float32_outputs": self.float32_outputs, "float32_rule": f"the source holds these in float32: "
                    f"compared within {F32_REL_TOL:.3g} of the tensor's largest magnitude"}
                   if self.float32_outputs else {})}

    def describe(self) -> str:
        lines = [f"{self.spike_mismatches} spike and {self.real_mismatches} real-value mismatches "
                 f"over {len(self.nodes_compared)} compared nodes"]
        for m in self.mismatches:
            margin = "" if m.margin is None else f", margin |U - boundary| = {m.margin:.3g}"
            lines.append(f"  node {m.node!r} step {m.step} index {m.index}: expected {m.expected!r}, "
                         f"got {m.got!r}{margin}")
        return "\n".join(lines)


def _same_values(a, b) -> bool:
    """``a`` and ``b`` are views of the very same float64 memory, element for element (same start, shape and
    strides): one array, whose comparison with itself ``add_self`` makes without the arithmetic."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype == np.float64 \
        and a.shape == b.shape and a.strides == b.strides \
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


def _finite_rule(expected: np.ndarray, got: np.ndarray):
    """``([max |expected|, max |got|], max |expected - got|)`` when every value of both (non-empty, at least 1-d) is
    finite, else None. Read block by block (``BLOCK`` values): each input is read from memory once and the
    differences stay in cache; every max and min is exact, so these are the whole arrays' (a NaN or Inf found in a
    block ends the reading: the general rule decides). An overflowing difference is Inf, as ``np.subtract`` gives."""
    if expected.ndim == 0 or expected.size == 0:
        return None
    e, g = expected.reshape(-1), got.reshape(-1)
    buf = np.empty(min(BLOCK, e.size))
    tops, largest = [], None
    for i in range(0, e.size, BLOCK):
        eb, gb = e[i:i + BLOCK], g[i:i + BLOCK]
        ends = (eb.max(), eb.min(), gb.max(), gb.min())
        if not all(np.isfinite(v) for v in ends):
            return None
        tops.append(ends)
        d = buf[:eb.size]
        with np.errstate(over="ignore"):
            np.subtract(eb, gb, out=d)
        np.abs(d, out=d)
        top = d.max()
        largest = top if largest is None or top > largest else largest
    e_top, e_bottom, g_top, g_bottom = (np.max([t[k] for t in tops]) if k % 2 == 0 else np.min([t[k] for t in tops])
                                        for k in range(4))
    return [max(e_top, -e_bottom), max(g_top, -g_bottom)], largest


def compare_graphs(before: Graph, after: Graph, inputs, *, progress: str | None = None) -> Comparison:
    """Run both graphs on ``inputs``; compare every node name they share (same type) and the outputs in order."""
    return compare_traces(before, run(before, inputs, progress=progress), after, run(after, inputs, progress=progress))


def compare_traces(before: Graph, ta: Trace, after: Graph, tb: Trace) -> Comparison:
    """Compare two recorded runs (``record="all"``) node by node, as ``compare_graphs`` does."""
    result = Comparison()
    shared = [n for n in before.nodes if n.op != "input" and n.name in after and after.node(n.name).type == n.type]
    for n in shared:
        if ta is tb:  # a pass that kept the very same nodes: the run is compared with itself
            result.add_self(n.name, ta.values[n.name], n.type.is_spike, tb.margins.get(n.name))
        else:
            result.add(n.name, ta.values[n.name], tb.values[n.name], n.type.is_spike, tb.margins.get(n.name))
    for n in before.nodes:  # re-timed onto D sub-steps: each physical step's sum must equal the old value
        t = after.node(n.name).type if n.name in after else None
        if t is not None and t.shape == n.type.shape and t.substeps > 1 and n.type.substeps == 1:
            margin = tb.margins.get(n.name)
            result.add(n.name, ta.values[n.name], per_step_sum(tb.values[n.name], t.substeps), n.type.is_spike,
                       None if margin is None else margin.reshape(-1, t.substeps, *margin.shape[1:]).min(1))
            shared.append(n)
    for oa, ob in zip(before.outputs, after.outputs):
        if oa != ob or oa not in {n.name for n in shared}:
            result.add(ob, ta.values[oa], tb.values[ob], after.node(ob).type.is_spike, tb.margins.get(ob))
    return result


def per_step_sum(x: np.ndarray, substeps: int) -> np.ndarray:
    """``[T * D, ...]`` sub-step values summed into ``[T, ...]`` physical steps."""
    return x.reshape(x.shape[0] // substeps, substeps, *x.shape[1:]).sum(1)


def run_torch(model: torch.nn.Module, inputs: np.ndarray, modules=()) -> tuple[np.ndarray, dict]:
    """Run ``model`` in float64 (on a copy); return its output and the outputs of the named ``modules``."""
    import copy
    model = copy.deepcopy(model).double().eval()
    seen: dict[str, list] = {}
    named = dict(model.named_modules())
    hooks = [named[m].register_forward_hook(lambda mod, i, o, m=m: seen.setdefault(m, []).append(o))
             for m in modules if m in named]
    where = f"model {type(model).__qualname__}"
    try:
        with torch.no_grad():
            out = model(torch.as_tensor(np.asarray(inputs), dtype=torch.float64))
    except SpikecError:
        raise
    except Exception as e:  # the user's forward failed on real data (fx traced it symbolically)
        raise BadInput(f"forward raised {type(e).__name__}: {e}", where=where,
                       remedy="make forward run on a float64 [T, B, ...] tensor of the declared input shape") from e
    finally:
        for h in hooks:
            h.remove()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        raise BadInput(f"forward returned {type(out).__name__}, not a tensor or a flat tuple of tensors", where=where,
                       remedy="return the output tensor (or a tuple of output tensors) from forward")
    for i, o in enumerate(outs):
        if o.is_complex() or not torch.isfinite(o).all():
            raise BadInput(f"output {i} of forward holds NaN, Inf or complex values on the verification inputs: "
                           "no deployment can be checked against it", where=where,
                           remedy="check the weights and the scale of the inputs (an overflow gives Inf)")
    captured = {m: v[0].numpy() for m, v in seen.items() if len(v) == 1 and isinstance(v[0], torch.Tensor)}
    return [o.numpy() for o in outs], captured


def compare_with_torch(model: torch.nn.Module, graph: Graph, inputs, *, progress: str | None = None,
                       trace: Trace | None = None, source=None) -> Comparison:
    """Compare the traced ``graph`` with its PyTorch source: each top-level module output and the outputs.

    ``source`` may pass a ``run_torch(model, inputs, module names)`` result already computed.
    """
    module_outputs = dict(graph.meta.get("module_outputs", ()))
    outputs, captured = source or run_torch(model, inputs, module_outputs)
    trace = trace or run(graph, inputs, progress=progress)
    result, last = Comparison(), read_last_nodes(graph)
    for module, node in module_outputs.items():
        if module in captured and node in graph:
            t = graph.node(node).type
            got = per_step_sum(trace.values[node], t.substeps) if t.substeps > 1 else trace.values[node]
            margin = trace.margins.get(node) if t.substeps == 1 else None
            expected, got, margin = _as_read(node in last, captured[module], got, margin)
            result.add(node, expected, got, t.is_spike, margin)
    for name, out in zip(graph.outputs, outputs):
        out, got, margin = _as_read(name in last, out, trace.values[name], trace.margins.get(name))
        result.add(name, out, got, graph.node(name).type.is_spike, margin)
    return result


def _as_read(last: bool, source, got, margin) -> tuple:
    """``(expected, got, margin)`` as compared; a value the source holds at the last step only (a read-out over
    time, ``[B, ...]``) against the IR's last step, both as a one-step ``[1, B, ...]`` sequence."""
    if not last:
        return source, got, margin
    return np.asarray(source)[None], got[-1:], None
