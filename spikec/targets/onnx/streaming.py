"""The streaming ONNX model: **one time step**, every state an explicit input and output.

Written next to ``model.onnx`` (whose loop form is this graph inside a Scan, ``loop.py``) as
``OUTDIR/model_step.onnx`` with the initial states in
``OUTDIR/model_step_init.npz``, so a runtime can feed an event source of any length one step at a time.

Contract (float64 unless ``onnx_dtype`` says otherwise, opset 21, ``B`` symbolic):

- inputs: the step's input ``[B, *shape]``, named ``input`` for a one-input graph (its IR name when another
  IR node is called ``input``), each IR input by its IR name otherwise; then the states, in the order the graph
  creates them (node order), each named ``state.<node>.<var>`` and laid out ``[B, *state_shape]``;
- outputs: the step's IR outputs ``[B, *shape]`` under their IR names, then the new states, in the order of the
  state inputs, each ``state_out.<node>.<var>``: feed ``state_out.X`` back as ``state.X`` at the next step;
- ``model_step_init.npz``: per state input name, its value before the first step for one sample
  (``state_shape``), to broadcast over B (``np.broadcast_to(init[k], (B, *init[k].shape))``).

The states (``<var>``): ``lif`` / ``intfire`` ``h`` (the membrane after the reset); ``silif`` ``u``, ``s``;
``csilif`` ``m_re``, ``m_im``, ``s``; ``lif_snntorch`` ``mem`` (snnTorch reads the delayed reset off ``mem``
itself, so no spike state is needed); ``synaptic_snntorch`` ``syn``, ``mem`` (+ ``spk`` when recurrent);
``rleaky_snntorch`` ``mem``, ``spk``; ``alpha_snntorch`` ``syn_exc``, ``syn_inh``, ``mem``; ``lif_sj`` ``v``
(starts at ``v_reset``, or 0); ``lif_norse`` / ``li_norse`` ``v`` (starts at ``v_leak``) (+ ``i`` with a
current); ``lif_recurrent_norse`` ``v`` (starts at ``v_leak``), ``i``, ``z`` (the spikes fed back);
``lif_adex_norse`` ``v``, ``i``, ``a`` (+ ``e``, the next step's exponential, starting at ``dv_exp_rest``, when
the node has one; + ``z`` when recurrent); ``lsnn_norse`` ``v``, ``i``, ``b`` (starts at ``v_th``) (+ ``z``); ``tdm``
``prev`` (the previous input); ``delay`` by k steps ``buffer`` ``[B, k, *shape]`` (the last k
inputs, oldest first); ``bntt`` / ``step_bias`` ``step`` (int64 ``[B]``, the step index their per-step tables
are gathered at: such a model streams at most the T steps its tables hold, onnxruntime's Gather fails past
them; ``spikec.max_steps`` in the model's metadata). Nodes of one neuron that differ only in ``read`` (or a
``lif`` and its membrane twin) share one recurrence, so one set of states, named after the first such node.

The graph is built by the same emitters as the unrolled model, on T = 1 (``StepBuilder``: each IR value is a
``[1, B, *shape]`` tensor named after its node; the step's inputs, outputs and states are (un)squeezed at the
boundary), so each step repeats the interpreter's arithmetic exactly as ``model.onnx`` does.

Refused by name (``model.onnx`` is then written unrolled): ops on virtual sub-steps (``intfire_unrolled``,
``substep_sum``, and any value on sub-steps), and any other stateful op with no step form here.
"""
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from spikec.core.checker import Comparison
from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.core.interpreter import Trace
from spikec.ir.graph import Graph, Node
from spikec.ops import OPS, facts
from spikec.ops.neurons import INTFIRE_UNROLLED, SUBSTEP_SUM
from spikec.targets.onnx.builder import BATCH, IR_VERSION, OPSET, Builder, where
from spikec.targets.onnx import sessions
from spikec.targets.onnx.emitters import EMITTERS

STEP_FILE = "model_step.onnx"
INIT_FILE = "model_step_init.npz"
STEP_FORM = "one-step streaming"
# the stateful ops with a step form: their cards' state (the variables their emitters carry through Builder.state /
# update_state), read live
STEP_FORMS = facts("state").keys()
NO_STEP_FORM = {
    INTFIRE_UNROLLED: "it replays each step as D virtual sub-steps; one physical step of the stream would be D "
                        "outputs (compile without unroll_virtual_steps to stream the intfire neurons)",
    SUBSTEP_SUM: "it sums D virtual sub-steps of each physical step",
}


@dataclass
class StateIO:
    name: str              # the state input, ``state.<node>.<var>``
    out: str               # the new state, ``state_out.<node>.<var>``
    init: np.ndarray       # one sample's value before the first step, ``state_shape``


class StepBuilder(Builder):
    """A ``Builder`` on one step (T = 1) whose neuron / delay states are graph inputs and outputs."""

    streaming = True

    def __init__(self, graph: Graph, dtype: str = "float64"):
        super().__init__(graph, 1, dtype)
        self.states: list[StateIO] = []
        self.updated: set[str] = set()

    def state(self, node: Node, var: str, initial, value=0.0, shape=None, dtype=None) -> str:
        shape = tuple(node.type.shape if shape is None else shape)
        name, out = f"state.{node.name}.{var}", f"state_out.{node.name}.{var}"
        if name in self._used or out in self._used:
            raise UnsupportedOp(f"the state names {name!r} / {out!r} clash with IR node names", where=where(node),
                                remedy="rename the node")
        self._used.update((name, out))
        v = np.asarray(value, dtype=dtype or self.np_dtype)
        if v.ndim:                                   # per channel: (C,) -> (C, 1, ..) against the shape
            v = v.reshape(-1, *([1] * (len(shape) - 1)))
        self.states.append(StateIO(name, out, np.array(np.broadcast_to(v, shape))))   # (0-d stays 0-d)
        return self.op("Unsqueeze", [name, self.ints([0])], hint=f"{name}/step")

    def update_state(self, node: Node, var: str, value: str) -> None:
        out = f"state_out.{node.name}.{var}"
        self.op("Squeeze", [value, self.ints([0])], out=out)
        self.updated.add(out)

    def step_model(self, doc: str, metadata: dict) -> onnx.ModelProto:
        """The ONNX model: IR inputs ``[B, ..]`` and states in, IR outputs ``[B, ..]`` and new states out."""
        g = self.graph
        names = input_names(g)
        rename = {i: self.fresh(f"{i}/step") for i in names if names[i] == i}
        rename.update({o: self.fresh(f"{o}/step") for o in g.outputs})
        for n in self.nodes:
            for field in (n.input, n.output):
                new = [rename.get(v, v) for v in field]
                del field[:]
                field.extend(new)
        first = [helper.make_node("Unsqueeze", [names[i], self.ints([0])], [rename.get(i, i)], name=f"{i}:step_in")
                 for i in names]
        last = [helper.make_node("Squeeze", [rename[o], self.ints([0])], [o], name=f"{o}:step_out")
                for o in dict.fromkeys(g.outputs)]
        self.nodes = first + self.nodes + last
        used = {i for n in self.nodes for i in n.input}
        inits = [i for i in self.initializers if i.name in used]
        info = lambda name, shape, dt: helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), [BATCH, *shape])
        ins = [info(names[i], g.node(i).type.shape, self.np_dtype) for i in names]
        ins += [info(s.name, s.init.shape, s.init.dtype) for s in self.states]
        outs = [info(o, g.node(o).type.shape, self.np_dtype) for o in dict.fromkeys(g.outputs)]
        outs += [info(s.out, s.init.shape, s.init.dtype) for s in self.states]
        graph = helper.make_graph(self.nodes, "spikec_step", ins, outs, inits, doc_string=doc)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="spikec", producer_version="0.1.0", ir_version=IR_VERSION)
        helper.set_model_props(model, {k: str(v) for k, v in metadata.items()})
        return model


def input_names(graph: Graph) -> dict[str, str]:
    """IR input -> the step model's input name: ``input`` for a one-input graph (unless another node is called
    so), the IR name otherwise."""
    ins = [n.name for n in graph.inputs]
    if len(ins) == 1 and not any(n.name == "input" and n.op != "input" for n in graph.nodes):
        return {ins[0]: "input"}
    return {i: i for i in ins}


def refusal(graph: Graph) -> str | None:
    """Why ``graph`` has no streaming form (naming the node), or None."""
    for n in graph.nodes:
        spec = OPS.get(n.op)
        if n.op in NO_STEP_FORM:
            return f"{where(n)}: {n.op} has no one-step form: {NO_STEP_FORM[n.op]}"
        if n.type.substeps != 1:
            return f"{where(n)} runs on {n.type.substeps} virtual sub-steps per step; a step model has one"
        if spec is not None and (spec.stateful or spec.per_step) and n.op not in STEP_FORMS:
            return f"{where(n)}: the stateful op {n.op} has no one-step ONNX form in spikec"
    return None


def table_rows(node: Node) -> int | None:
    """The steps a per-step op's tables hold (its card's ``per_step`` and its ``(T, ...)`` params), else None."""
    card = OPS[node.op]
    rows = [node.params[p.name].shape[0] for p in card.params if p.layout.startswith("(T") and p.name in node.params]
    return min(rows) if card.per_step and rows else None


def max_steps(graph: Graph) -> int | None:
    """The longest stream the model's per-step tables (``bntt``, ``step_bias``) allow, or None (unbounded)."""
    return min((r for r in map(table_rows, graph.nodes) if r is not None), default=None)


def export_step(graph: Graph, dtype: str = "float64") -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The one-step model of ``graph`` and its initial states (per sample); UnsupportedOp if it has none."""
    why = refusal(graph)
    if why is not None:
        raise UnsupportedOp(f"no streaming ONNX model: {why}", remedy="use the unrolled model.onnx")
    for o in graph.outputs:
        if graph.node(o).op == "input":
            raise UnsupportedOp("a graph output that is a graph input has no ONNX form here", where=f"output {o!r}")
    b = StepBuilder(graph, dtype)
    for node in graph.nodes:
        out = EMITTERS[node.op](b, node, *node.inputs)
        if out != node.name:
            b.op("Identity", [out], out=node.name)
    missing = [s.out for s in b.states if s.out not in b.updated]
    if missing:
        raise UnsupportedOp(f"no streaming ONNX model: the states {missing} have no update",
                            remedy="report this: an emitter's step form is incomplete")
    limit = max_steps(graph)
    meta = {"spikec.form": STEP_FORM, "spikec.dtype": dtype, "spikec.inputs": json.dumps(input_names(graph)),
            "spikec.states": json.dumps([s.name for s in b.states]),
            "spikec.max_steps": "unbounded" if limit is None else limit,
            "spikec.init": f"{INIT_FILE}: per state input, one sample's initial value; broadcast over B"}
    model = b.step_model(f"spikec {STEP_FORM} export, {dtype}: inputs [B, ...] and states in, outputs [B, ...] "
                         f"and new states (state_out.*, fed back as state.*) out", meta)
    onnx.checker.check_model(model, full_check=True)
    return model, {s.name: s.init for s in b.states}


# -- running and checking a stream ---------------------------------------------------------------------------
def session(model: onnx.ModelProto | bytes, probes=()):
    """An onnxruntime CPU session of ``model``, also returning the internal ``[1, B, ..]`` values ``probes``."""
    if probes:
        probe = onnx.ModelProto()
        probe.CopyFrom(model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model))
        elem = probe.graph.input[0].type.tensor_type.elem_type
        for name, shape in probes:
            probe.graph.output.append(helper.make_tensor_value_info(name, elem, [1, BATCH, *shape]))
        model = probe
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return sessions.session(data)


def initial_states(init: dict[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
    """The init file's per-sample states broadcast over ``batch`` samples (``[B, *state_shape]``)."""
    return {k: np.array(np.broadcast_to(v, (batch, *v.shape))) for k, v in init.items()}


def run_stream(sess, inputs: dict[str, np.ndarray], init: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Step ``sess`` over ``inputs`` (step-model input name -> ``[T, B, ..]``) from the states ``init`` (per
    sample), feeding each step's ``state_out.*`` back as ``state.*``; every other output stacked along a new
    leading time axis."""
    T, batch = next(iter(inputs.values())).shape[:2]
    states = initial_states(init, batch)
    missing = [i.name for i in sess.get_inputs() if i.name not in inputs and i.name not in states]
    if missing:
        raise BadInput(f"the step model needs inputs {missing} (states missing from {INIT_FILE}?)")
    names = [o.name for o in sess.get_outputs()]
    seq: dict[str, list] = {n: [] for n in names if not n.startswith("state_out.")}
    for t in range(T):
        got = dict(zip(names, sess.run(names, {**{k: v[t] for k, v in inputs.items()}, **states})))
        states = {k: got["state_out." + k[len("state."):]] for k in states}
        for n in seq:
            seq[n].append(got[n])
    return {n: np.stack(v) for n, v in seq.items()}    # a probe ([1, B, ..] per step) is [T, 1, B, ..]


def step_feeds(graph: Graph, inputs, np_dtype) -> dict[str, np.ndarray]:
    """The verification ``inputs`` (an array, or IR name -> ``[T, B, ..]``) keyed by the step model's names."""
    names = input_names(graph)
    if not isinstance(inputs, dict):
        if len(names) != 1:
            raise BadInput(f"the graph has {len(names)} inputs {list(names)}; pass a dict name -> array")
        inputs = {next(iter(names)): inputs}
    return {names[i]: np.ascontiguousarray(np.asarray(inputs[i]), dtype=np_dtype) for i in names}


def check_stream(model: onnx.ModelProto, graph: Graph, inputs, reference: Trace, init: dict[str, np.ndarray],
                 probe: bool = True) -> dict:
    """Step ``model`` over the T steps of ``inputs`` from ``init`` and compare each step with the interpreter's
    ``reference``: the outputs, and (``probe``) every other IR value the step graph holds. Spikes must be
    identical, reals within 1e-9 relative (``Comparison``)."""
    elem = model.graph.input[0].type.tensor_type.elem_type
    feeds = step_feeds(graph, inputs, helper.tensor_dtype_to_np_dtype(elem))
    inner = {o for n in model.graph.node for o in n.output}
    probes = [n for n in graph.nodes if probe and n.op != "input" and n.name not in graph.outputs
              and n.name in inner and n.name in reference.values]
    sess = session(model, [(n.name, n.type.shape) for n in probes])
    got = run_stream(sess, feeds, init)
    cmp = Comparison()
    for o in dict.fromkeys(graph.outputs):
        cmp.add(o, reference.values[o], got[o], graph.node(o).type.is_spike, reference.margins.get(o))
    for n in probes:
        cmp.add(n.name, reference.values[n.name], got[n.name][:, 0], n.type.is_spike, reference.margins.get(n.name))
    summary = cmp.summary()
    summary.update({"steps": int(next(iter(feeds.values())).shape[0]), "spike_exact": cmp.spike_mismatches == 0,
                    "outputs_compared": list(dict.fromkeys(graph.outputs))})
    return summary


def streaming_result(graph: Graph, inputs, reference: Trace, dtype: str, step=None, refused: str | None = None
                     ) -> tuple[dict, dict]:
    """The ONNX target's ``streaming`` report and files: the step model checked step by step, or the refusal.
    ``step`` = ``(model, init)`` already built by ``export_step`` (or ``refused``, its refusal) skips building it."""
    if refused is not None:
        return {"written": False, "refused": refused, "equivalent": None}, {}
    try:
        model, init = step if step is not None else export_step(graph, dtype)
    except UnsupportedOp as e:
        return {"written": False, "refused": str(e), "equivalent": None}, {}
    result = check_stream(model, graph, inputs, reference, init)
    data = model.SerializeToString()
    limit = max_steps(graph)
    report = {"written": True, "file": STEP_FILE, "init_file": INIT_FILE, "form": STEP_FORM, "refused": None,
              "inputs": [i.name for i in model.graph.input if not i.name.startswith("state.")],
              "outputs": result["outputs_compared"], "states": list(init),
              "state_naming": "state.<node>.<var> in, state_out.<node>.<var> out (same order)",
              "max_steps": limit, "onnx_nodes": len(model.graph.node), "bytes": len(data),
              **{k: result[k] for k in ("steps", "spike_exact", "equivalent", "nodes_compared", "spikes_compared",
                                        "values_compared", "spike_mismatches", "real_mismatches", "max_rel_diff",
                                        "first_mismatches")}}
    files = {STEP_FILE: lambda path: Path(path).write_bytes(data),
             INIT_FILE: lambda path: _write_init(path, init)}
    return report, files


def _write_init(path, init: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **init)


def load_init(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def verify_step_outdir(outdir, graph: Graph, inputs, reference: Trace) -> dict:
    """``spikec verify``: re-run ``OUTDIR/model_step.onnx`` step by step from ``model_step_init.npz``."""
    path, init_path = Path(outdir) / STEP_FILE, Path(outdir) / INIT_FILE
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model, full_check=True)
        init = load_init(init_path)
    except Exception as e:  # missing, truncated or invalid files: not equivalent, with the reason
        return {"equivalent": False, "error": f"{path} or {init_path.name} does not load (or fails onnx.checker): "
                                              f"{type(e).__name__}: {e}"}
    try:
        return check_stream(model, graph, inputs, reference, init)
    except Exception as e:
        return {"equivalent": False, "error": f"onnxruntime could not stream {path}: {type(e).__name__}: {e}"}
