"""ONNX target (``--target onnx``): the deployed IR as ``OUTDIR/model.onnx``, checked in onnxruntime.

Interface: the model takes every IR input as ``[T, B, *shape]`` (T fixed at export to the verification inputs'
T, B symbolic) and returns every IR output as ``[T_v, B, *shape]`` (``T_v = T * substeps`` for outputs on
virtual sub-steps), each named after its IR node. Two forms, recorded in the report (``form``, ``form_reason``)
and in the model's metadata (``spikec.form``):

- **loop** (``loop.py``, the default): one ONNX ``Scan`` over T whose body is the one-step graph of
  ``model_step.onnx`` (the same emitters on T = 1, each neuron / delay / step-index state carried by the Scan).
  Its node count and onnxruntime's session build do not grow with T.
- **unrolled** (the fallback, for graphs the step form refuses: ops on virtual sub-steps, ``intfire_unrolled``,
  ``substep_sum``, stateful ops with no one-step form; ``form_reason`` names the node): stateless ops
  (convolution, linear, pooling, BN, DS-MPA, ...) run once over all steps and samples and each neuron's
  recurrence is unrolled over the T steps (Split along time, the update written out step by step, Concat back).
  Its size grows linearly with T.

Arithmetic: float64 (ONNX DOUBLE), opset 21. Element-wise arithmetic mirrors the reference
interpreter's kernels operation by operation, so neuron updates, BNTT, TDM, delays, pooling and
window sums are bit-identical given the same inputs (tests check this). Three things agree only to
a few ulp: convolutions / linear / DS-MPA matmuls (onnxruntime has no float64 Conv; im2col + MatMul
sums in another order than MKL), DS-MPA's ELU (``exp(z) - 1`` vs torch's vectorized ``expm1``), and
an unfolded BatchNorm (torch evaluates ``x * alpha + beta`` as one fused multiply-add on FMA CPUs;
ONNX has no FMA operator). With integer-valued weights every sum is exact and the whole graph is
bit-identical. Verification runs
the written file and compares every IR node exposed as an ONNX value (each tensor is named
after its IR node; in the loop form a body value is exposed as an extra Scan output): spikes must be identical,
real values within 1e-9 relative (checker.py), and
the model as written (graph outputs only) must give the same outputs. The report states the
smallest firing margin ``|U - threshold|`` seen, i.e. how far the ulp-level differences were from
deciding a spike. A float32 variant (``export(..., dtype="float32")``, native Conv) exists for
speed; it is not claimed exact.

**Streaming form** (``streaming.py``): next to it, ``model_step.onnx`` is the model of one time step with every
neuron / delay state an explicit input and output (``state.<node>.<var>`` in, ``state_out.<node>.<var>`` out)
and ``model_step_init.npz`` the initial states, so a runtime can stream inputs of any length; it is built by the
same emitters on T = 1, checked step by step against the interpreter (``report["streaming"]``), and refused by
name for ops on virtual sub-steps (the unrolled model is still written). The loop model is this step graph
inside a Scan.

Every IR op needs an emitter (``emitters.py``, one function per op; the frameworks' exact neurons in
``framework_emitters.py``); a graph with an op that has none is refused with ``UnsupportedOp`` naming the node.
"""
import json
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from spikec.core.checker import Comparison
from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.core.interpreter import Trace, read_last
from spikec.ir.graph import Graph
from spikec.core.verify import verify
from spikec.ops import OPS
from spikec.targets import TargetResult, register_target
from spikec.targets.onnx.builder import BATCH, DTYPES, IR_VERSION, OPSET, Builder, where
from spikec.targets.onnx import framework_emitters  # noqa: F401  (registers the frameworks' neurons)
from spikec.targets.onnx import sinabs_sj_emitters  # noqa: F401  (Sinabs's and SpikingJelly's nonlinear neurons)
from spikec.targets.onnx import ttfs  # noqa: F401  (the TTFS coding's ops; was registered by spikec.ttfs)
from spikec.targets.onnx import aten_emitters  # noqa: F401  (the ATen capture's ops: GELU, where, ...)
from spikec.targets.onnx import time_emitters  # noqa: F401  (read-outs over time: x.mean(0))
from spikec.targets.onnx import sessions
from spikec.targets.onnx.emitters import EMITTERS, register_emitter
from spikec.targets.onnx.loop import LOOP_DETAIL, LOOP_FORM, EditedLoopModel, export_loop, is_loop, loop_refusal, \
    loop_with_probes, node_count
from spikec.targets.onnx.streaming import STEP_FILE, export_step, streaming_result, verify_step_outdir

__all__ = ["export", "run_model", "check_model_against", "register_emitter", "form_of", "FILE", "FORM", "OPSET"]

FILE = "model.onnx"
FORM = LOOP_FORM
UNROLLED_FORM = "unrolled"
FORMS = ("auto", LOOP_FORM, UNROLLED_FORM)
FORM_DETAIL = {LOOP_FORM: LOOP_DETAIL,
               UNROLLED_FORM: "one graph over [T, B, ...] with T fixed at export and B symbolic; neuron recurrences "
                              "unrolled over T (no state inputs/outputs); stateless ops batched over T*B"}


def _require_emitters(graph: Graph) -> None:
    for node in graph.nodes:
        if node.op not in EMITTERS:
            raise UnsupportedOp(f"op {node.op!r} has no ONNX form in spikec", where=where(node),
                                remedy="compile without --target onnx, or add an emitter for it "
                                       "(spikec/targets/onnx/emitters.py, register_emitter)")


def export(graph: Graph, steps: int, dtype: str = "float64", form: str = "auto", step=None) -> onnx.ModelProto:
    """The ONNX model of ``graph`` for ``steps`` physical time steps; passes ``onnx.checker`` (full check).

    ``form``: ``"auto"`` the loop form, or the unrolled one when the graph has no step form (the reason in the
    metadata's ``spikec.form_reason``); ``"loop"`` (UnsupportedOp when refused) or ``"unrolled"``. ``step`` =
    ``(model, init)`` reuses a step model already built by ``streaming.export_step``."""
    if form not in FORMS:
        raise BadInput(f"ONNX form {form!r} is not one of {FORMS}")
    verify(graph, "before ONNX export")
    _require_emitters(graph)
    why = None
    if form != UNROLLED_FORM:
        why = loop_refusal(graph)
        if why is None:
            try:
                return export_loop(graph, steps, dtype, step)
            except UnsupportedOp as e:   # e.g. state names clashing with IR names: the unrolled form has none
                if form == LOOP_FORM:
                    raise
                why = str(e)
        elif form == LOOP_FORM:
            raise UnsupportedOp(f"no loop ONNX model: {why}", remedy="export with form='unrolled'")
    return _export_unrolled(graph, steps, dtype, why)


def _export_unrolled(graph: Graph, steps: int, dtype: str, why: str | None) -> onnx.ModelProto:
    b = Builder(graph, steps, dtype)
    for node in graph.nodes:
        out = EMITTERS[node.op](b, node, *node.inputs)
        if out != node.name:
            b.op("Identity", [out], out=node.name)
    for o in graph.outputs:
        if graph.node(o).op == "input":
            raise UnsupportedOp("a graph output that is a graph input has no ONNX form here", where=f"output {o!r}")
    meta = {"spikec.form": UNROLLED_FORM, "spikec.steps": steps, "spikec.dtype": dtype,
            "spikec.form_reason": why or "asked for (form='unrolled')",
            "spikec.time_axis": "inputs [T, B, ...]; an output on D virtual sub-steps is [T*D, B, ...]"}
    model = b.model(f"spikec {UNROLLED_FORM} export, T={steps}, {dtype}: {FORM_DETAIL[UNROLLED_FORM]}", meta)
    onnx.checker.check_model(model, full_check=True)
    return model


def form_of(model: onnx.ModelProto) -> tuple[str, str | None]:
    """(``loop`` | ``unrolled``, why the loop form was not used or None) from the model's metadata."""
    meta = {p.key: p.value for p in model.metadata_props}
    form = LOOP_FORM if is_loop(model) else UNROLLED_FORM
    return form, (None if form == LOOP_FORM else meta.get("spikec.form_reason"))


def _feeds(graph: Graph, inputs, np_dtype) -> dict[str, np.ndarray]:
    names = [n.name for n in graph.inputs]
    if not isinstance(inputs, dict):
        if len(names) != 1:
            raise BadInput(f"the graph has {len(names)} inputs {names}; pass a dict name -> array")
        inputs = {names[0]: inputs}
    return {n: np.ascontiguousarray(np.asarray(inputs[n]), dtype=np_dtype) for n in names}


def _steps(graph: Graph, feeds: dict) -> int:
    n = graph.inputs[0]
    return feeds[n.name].shape[0] // n.type.substeps


def with_probes(model: onnx.ModelProto, graph: Graph, names) -> onnx.ModelProto:
    """A copy of ``model`` that also outputs the IR values ``names`` (each ONNX tensor is named after its node;
    in the loop form, each body tensor as an extra Scan output)."""
    if is_loop(model):
        return loop_with_probes(model, graph, names)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    elem = model.graph.input[0].type.tensor_type.elem_type
    steps = model.graph.input[0].type.tensor_type.shape.dim[0].dim_value // graph.inputs[0].type.substeps
    present = {o.name for o in probe.graph.output}
    for name in names:
        if name not in present:
            t = graph.node(name).type
            probe.graph.output.append(helper.make_tensor_value_info(name, elem, [steps * t.substeps, BATCH, *t.shape]))
    return probe


def run_model(model: onnx.ModelProto | bytes, feeds: dict, threads: int | None = None) -> dict[str, np.ndarray]:
    """Run ``model`` in onnxruntime (CPU): every graph output by name."""
    data = model if isinstance(model, bytes) else model.SerializeToString()
    if threads:
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    else:
        sess = sessions.session(data)   # torch's thread count; kept for reuse inside sessions.reused()
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def check_model_against(model: onnx.ModelProto, graph: Graph, inputs, reference: Trace) -> dict:
    """Run ``model`` as written and with every IR value exposed; compare with the interpreter's ``reference``.

    Returns the checker summary (``equivalent``, ``spikes_compared``, ...) plus the target's own fields.
    """
    np_dtype = {v[1]: v[0] for v in DTYPES.values()}[model.graph.input[0].type.tensor_type.elem_type]
    feeds = _feeds(graph, inputs, np_dtype)
    fixed = model.graph.input[0].type.tensor_type.shape.dim[0].dim_value
    given = next(iter(feeds.values())).shape[0]
    if fixed != given:
        raise BadInput(f"{FILE} is exported for T={fixed} steps; the inputs have T={given}",
                       remedy=f"verify with inputs of T={fixed}, or recompile with these inputs")
    plain = run_model(model, feeds)
    nodes = [n for n in graph.nodes if n.op != "input" and n.name in reference.values]
    probed = run_model(with_probes(model, graph, [n.name for n in nodes]), feeds)

    cmp = Comparison()
    for n in nodes:
        cmp.add(n.name, reference.values[n.name], probed[n.name], n.type.is_spike, reference.margins.get(n.name))
    outputs = Comparison()
    for o in graph.outputs:
        outputs.add(o, reference.values[o], plain[o], graph.node(o).type.is_spike, reference.margins.get(o))
    same = all(np.array_equal(plain[o], probed[o]) for o in graph.outputs)
    margins = [reference.margins[n.name] for n in nodes if n.name in reference.margins
               and reference.margins[n.name].size]
    summary = cmp.summary()
    summary.update({
        "equivalent": cmp.equivalent and outputs.equivalent,
        "spike_exact": cmp.spike_mismatches == 0 and outputs.spike_mismatches == 0,
        "outputs_compared": list(graph.outputs),
        "outputs": outputs.summary(),
        "neurons_compared": sum(1 for n in nodes if OPS[n.op].neuron and n.attrs.get("output", "spikes") == "spikes"),
        "probe_outputs_match_plain": same,
        "min_firing_margin": min((float(m.min()) for m in margins), default=None),
    })
    summary["equivalent"] = summary["equivalent"] and same
    return summary


def onnx_target(graph: Graph, inputs, reference: Trace, options: dict) -> TargetResult:
    start = time.perf_counter()
    dtype = (options or {}).get("onnx_dtype", "float64")
    steps = _steps(graph, _feeds(graph, inputs, np.float64))
    verify(graph, "before ONNX export")
    _require_emitters(graph)
    try:   # one step model: model_step.onnx, and the body of the loop model.onnx
        step, refused = export_step(graph, dtype), None
    except UnsupportedOp as e:
        step, refused = None, str(e)
    model = export(graph, steps, dtype, step=step) if step is not None else \
        _export_unrolled(graph, steps, dtype, loop_refusal(graph) or refused)
    form, reason = form_of(model)
    last = sorted(read_last(graph))
    if last:   # the file says which outputs are a running read-out whose last step is the model's output
        model.metadata_props.add(key="spikec.read_last", value=",".join(last))
    data = model.SerializeToString()
    result = check_model_against(model, graph, inputs, reference)
    streaming, step_files = streaming_result(graph, inputs, reference, dtype, step=step, refused=refused)
    import onnxruntime as ort
    report = {
        "name": "onnx", "file": FILE, "form": form, "form_reason": reason, "form_detail": FORM_DETAIL[form],
        "opset": OPSET, "ir_version": IR_VERSION, "dtype": dtype, "steps": steps, "batch": BATCH + " (symbolic)",
        "onnx_nodes": node_count(model), "onnx_nodes_outer": len(model.graph.node),
        "initializers": len(model.graph.initializer), "bytes": len(data),
        "checker": "onnx.checker.check_model(full_check=True) passed",
        "runtime": f"onnxruntime {ort.__version__} CPUExecutionProvider",
        **{k: result[k] for k in ("spike_exact", "equivalent", "outputs_compared", "nodes_compared",
                                  "neurons_compared", "spikes_compared", "values_compared", "spike_mismatches",
                                  "real_mismatches", "max_rel_diff", "min_firing_margin",
                                  "probe_outputs_match_plain", "first_mismatches")},
        "outputs": result["outputs"],
        **({"read_last": last, "read_last_note": READ_LAST_NOTE} if last else {}),
        "streaming": streaming,
        "seconds": round(time.perf_counter() - start, 3),
    }
    ok = bool(result["equivalent"]) and streaming["equivalent"] is not False
    return TargetResult(report, ok, {FILE: lambda path: Path(path).write_bytes(data), **step_files})


def verify_outdir(outdir, graph: Graph, inputs, reference: Trace) -> dict:
    """``spikec verify``: re-run ``OUTDIR/model.onnx`` as written, and ``model_step.onnx`` step by step when OUTDIR
    holds it (or report.json says it was written); a file that fails to load or run fails."""
    result = _verify_model(outdir, graph, inputs, reference)
    if (Path(outdir) / STEP_FILE).exists() or _streaming_claimed(outdir):
        result["streaming"] = verify_step_outdir(outdir, graph, inputs, reference)
        result["equivalent"] = bool(result["equivalent"]) and bool(result["streaming"]["equivalent"])
    return result


def _streaming_claimed(outdir) -> bool:
    """report.json says the ONNX target wrote ``model_step.onnx`` (so a missing file fails verify)."""
    try:
        report = json.loads((Path(outdir) / "report.json").read_text())
    except (OSError, ValueError):
        return False
    claims = [report.get("target")] + list((report.get("targets") or {}).values())
    return any(isinstance(c, dict) and c.get("name") == "onnx" and isinstance(c.get("streaming"), dict)
               and c["streaming"].get("written") for c in claims)


def _verify_model(outdir, graph: Graph, inputs, reference: Trace) -> dict:
    path = Path(outdir) / FILE
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # missing, truncated or invalid file: not equivalent, with the reason
        return {"equivalent": False, "error": f"{path} does not load or fails onnx.checker: {type(e).__name__}: {e}"}
    try:
        return {**check_model_against(model, graph, inputs, reference), "form": form_of(model)[0]}
    except EditedLoopModel as e:   # the file in OUTDIR, not the user's inputs: a verdict, and the others still run
        return {"equivalent": False, "error": f"{path}: {e.message()}"}
    except BadInput:
        raise
    except Exception as e:
        return {"equivalent": False, "error": f"onnxruntime could not run {path}: {type(e).__name__}: {e}"}


READ_LAST_NOTE = ("these outputs are read-outs over time (x.mean(0) / x.sum(0) in the source): model.onnx gives "
                  "the running read-out [T, B, ...] and the source's [B, ...] output is its last step, out[-1] "
                  "(metadata spikec.read_last); the check compares every step against the interpreter")

register_target("onnx", onnx_target, verify=verify_outdir)
