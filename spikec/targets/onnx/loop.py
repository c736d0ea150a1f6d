"""``model.onnx`` as a loop: one ONNX ``Scan`` over T around the one-step graph of ``model_step.onnx``.

The body is the streaming step model (``streaming.export_step``: the same emitters on T = 1, every neuron /
delay / step-index state an explicit input and output), with its inputs and outputs reordered to ``Scan``'s
convention (carried states first, then the step's inputs; new states first, then the step's outputs) and every
body tensor renamed under one prefix so no body name shadows an outer one (onnx.checker requires that). The
outer graph broadcasts each state's per-sample initial value (``model_step_init.npz``'s) over B with ``Expand``
and feeds the Scan; ``Scan`` slices the ``[T, B, ...]`` inputs along time and stacks each step's outputs back
into ``[T, B, ...]``. So the model's interface is the unrolled model's (inputs and outputs ``[T, B, ...]``
named after their IR nodes, T fixed at export, B symbolic) while its node count and onnxruntime's session build
do not grow with T. Per-step tables (``bntt``, ``step_bias``) are gathered at the step index the body carries
as a state.

Why Scan rather than Loop: Scan does the slicing and stacking itself (a Loop body would Gather ``x[i]`` from the
outer scope and need a trip count and a condition); the step index needed by per-step tables is already a state
of the step graph.

Refused (the caller falls back to the unrolled form, recording the reason): whatever the step model refuses
(``streaming.refusal``: ops on virtual sub-steps, stateful ops with no one-step form).
"""
import numpy as np
import onnx
from onnx import helper, numpy_helper

from spikec.ir.errors import BadInput, InternalError
from spikec.ir.graph import Graph
from spikec.targets.onnx.builder import BATCH, IR_VERSION, OPSET, where
from spikec.targets.onnx.streaming import export_step, input_names, refusal, table_rows

LOOP_FORM = "loop"
LOOP_DETAIL = ("one Scan over T around the one-step graph (model_step.onnx's, states carried by the Scan); inputs "
               "and outputs [T, B, ...] with T fixed at export and B symbolic; node count independent of T")
PREFIX_KEY = "spikec.loop_body_prefix"   # metadata: the prefix of the body's tensor names (probes find them by it)


def loop_refusal(graph: Graph) -> str | None:
    """Why ``graph`` has no loop form (the step model's refusal, naming the node), or None."""
    return refusal(graph)


def export_loop(graph: Graph, steps: int, dtype: str = "float64", step=None) -> onnx.ModelProto:
    """The loop model of ``graph`` over ``steps`` steps; ``step`` = ``(model, init)`` reuses a built step model.
    UnsupportedOp when the graph has no step form; passes ``onnx.checker`` (full check)."""
    for n in graph.nodes:   # as the unrolled emitters: a per-step table must cover exactly the exported T
        rows = table_rows(n)
        if rows is not None:
            if rows != steps:
                raise BadInput(f"the per-step table of {n.op} holds T={rows} steps; the ONNX model is exported for "
                               f"T={steps}", where=where(n), remedy=f"compile with --steps {rows}")
    model, init = step if step is not None else export_step(graph, dtype)
    loop = _wrap(model, init, graph, steps)
    onnx.checker.check_model(loop, full_check=True)
    return loop


def _wrap(step: onnx.ModelProto, init: dict, graph: Graph, steps: int) -> onnx.ModelProto:
    elem = step.graph.input[0].type.tensor_type.elem_type
    states = list(init)
    ins = input_names(graph)                       # IR input -> step input name
    outs = list(dict.fromkeys(graph.outputs))
    ir_names = {n.name for n in graph.nodes}
    prefix = _prefix(ir_names)
    body = _renamed_body(step.graph, prefix)
    by_name = {v.name: v for v in body.input}
    body_outs = {v.name: v for v in body.output}
    body.ClearField("input")
    body.input.extend([by_name[prefix + s] for s in states] + [by_name[prefix + ins[i]] for i in ins])
    body.ClearField("output")
    body.output.extend([body_outs[prefix + "state_out." + s[len("state."):]] for s in states]
                       + [body_outs[prefix + o] for o in outs])
    body.name = "spikec_step_body"

    used = ir_names | _names(body)
    fresh = _fresher(used)
    first = next(iter(ins))
    nodes, inits = [], []
    batch = fresh("loop/batch")
    nodes.append(helper.make_node("Shape", [first], [batch], name=fresh("loop/batch:Shape"), start=1, end=2))
    initial = []
    for s in states:
        value = init[s]
        v, shp = fresh(f"loop/init.{s}"), fresh(f"loop/shape.{s}")
        inits += [numpy_helper.from_array(np.ascontiguousarray(value), v),
                  numpy_helper.from_array(np.asarray(value.shape, dtype=np.int64).reshape(-1), shp)]
        full, start = fresh(f"loop/full_shape.{s}"), fresh(f"loop/initial.{s}")
        nodes.append(helper.make_node("Concat", [batch, shp], [full], name=fresh(f"{full}:Concat"), axis=0))
        nodes.append(helper.make_node("Expand", [v, full], [start], name=fresh(f"{start}:Expand")))
        initial.append(start)
    final = [fresh(f"loop/final.{s}") for s in states]    # the states after the last step (not graph outputs)
    nodes.append(helper.make_node("Scan", initial + list(ins), final + outs, name=fresh("loop:Scan"), body=body,
                                  num_scan_inputs=len(ins)))
    info = lambda name, t: helper.make_tensor_value_info(name, elem, [steps * t.substeps, BATCH, *t.shape])
    outer = helper.make_graph(nodes, "spikec", [info(i, graph.node(i).type) for i in ins],
                              [info(o, graph.node(o).type) for o in outs], inits,
                              doc_string=f"spikec loop export, T={steps}: {LOOP_DETAIL}")
    model = helper.make_model(outer, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="spikec",
                              producer_version="0.1.0", ir_version=IR_VERSION)
    dtype = next((p.value for p in step.metadata_props if p.key == "spikec.dtype"), "")
    meta = {"spikec.dtype": dtype}
    meta.update({"spikec.form": LOOP_FORM, "spikec.steps": str(steps), PREFIX_KEY: prefix,
                 "spikec.time_axis": "inputs and outputs [T, B, ...]",
                 "spikec.loop": "Scan over T; body = the one-step graph (model_step.onnx), states carried"})
    helper.set_model_props(model, meta)
    return model


def _prefix(ir_names: set[str]) -> str:
    """``step/`` unless an IR node's name starts with it (then ``step1/``, ...): no body name equals an IR name."""
    prefix, k = "step/", 0
    while any(n.startswith(prefix) for n in ir_names):
        k += 1
        prefix = f"step{k}/"
    return prefix


def _names(g: onnx.GraphProto) -> set[str]:
    return ({v.name for v in g.input} | {v.name for v in g.output} | {i.name for i in g.initializer}
            | {o for n in g.node for o in n.output} | {n.name for n in g.node})


def _fresher(used: set[str]):
    def fresh(hint: str) -> str:
        name, k = hint, 1
        while name in used:
            name, k = f"{hint}_{k}", k + 1
        used.add(name)
        return name
    return fresh


def _renamed_body(g: onnx.GraphProto, prefix: str) -> onnx.GraphProto:
    """A copy of the step graph with every tensor and node name prefixed (the body has no outer references)."""
    body = onnx.GraphProto()
    body.CopyFrom(g)
    ren = lambda s: prefix + s if s else s     # "" marks an omitted optional input
    for n in body.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            raise InternalError(f"the step graph's node {n.name!r} ({n.op_type}) holds a subgraph; the loop "
                                "wrapper renames flat graphs only")
        new_in, new_out = [ren(x) for x in n.input], [ren(x) for x in n.output]
        del n.input[:], n.output[:]
        n.input.extend(new_in)
        n.output.extend(new_out)
        n.name = ren(n.name)
    for field in (body.input, body.output, body.value_info, body.initializer):
        for v in field:
            v.name = ren(v.name)
    return body


# -- probes: IR values inside the body exposed as extra Scan outputs ------------------------------------------
class EditedLoopModel(BadInput):
    """A loop ``model.onnx`` whose structure is not the one spikec writes: verify reports it not equivalent."""



def is_loop(model: onnx.ModelProto) -> bool:
    return any(p.key == "spikec.form" and p.value == LOOP_FORM for p in model.metadata_props)


def loop_with_probes(model: onnx.ModelProto, graph: Graph, names) -> onnx.ModelProto:
    """A copy of the loop ``model`` that also outputs the IR values ``names`` as ``[T, B, ...]``: each body tensor
    ``<prefix><name>`` (``[1, B, ...]``) is squeezed and stacked by the Scan as an extra scan output."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    prefix = next((p.value for p in probe.metadata_props if p.key == PREFIX_KEY), None)
    scans = [n for n in probe.graph.node if n.op_type == "Scan"]
    if prefix is None or len(scans) != 1:
        raise EditedLoopModel("model.onnx says it is a loop model but has no single Scan or no body prefix",
                              remedy="recompile (the file was edited)")
    scan = scans[0]
    body = next(a.g for a in scan.attribute if a.name == "body")
    elem = probe.graph.input[0].type.tensor_type.elem_type
    steps = probe.graph.input[0].type.tensor_type.shape.dim[0].dim_value // graph.inputs[0].type.substeps
    fresh = _fresher(_names(body) | _names(probe.graph) | {n.name for n in graph.nodes})
    present = {o.name for o in probe.graph.output}
    wanted = [n for n in dict.fromkeys(names) if n not in present]
    if not wanted:
        return probe
    axes = fresh(prefix + "probe/axes")
    body.initializer.append(numpy_helper.from_array(np.asarray([0], dtype=np.int64), axes))
    for name in wanted:
        t = graph.node(name).type
        out = fresh(f"{prefix}{name}/probe")
        body.node.append(helper.make_node("Squeeze", [prefix + name, axes], [out], name=fresh(f"{out}:Squeeze")))
        body.output.append(helper.make_tensor_value_info(out, elem, [BATCH, *t.shape]))
        scan.output.append(name)
        probe.graph.output.append(helper.make_tensor_value_info(name, elem, [steps * t.substeps, BATCH, *t.shape]))
    return probe


def node_count(model: onnx.ModelProto) -> int:
    """Nodes of the model, those inside subgraphs (the Scan's body) included."""
    def count(g: onnx.GraphProto) -> int:
        return sum(1 + sum(count(a.g) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH) for n in g.node)
    return count(model.graph)
