"""Deploy exactly what was trained: a network of ``spikec.nn.xylo`` modules (op ``xylo_lif``).

Their forward *is* Xylo's integer arithmetic (``spikec/nn/xylo.py``), and the frontend keeps their integers as
they are (``spikec/frontend/xylo.py``; the compiler checks the traced graph against the modules' forward). So
no quantization: the spec's arrays are the modules' own weights (transposed to Xylo's [pre, post]), shifts,
dashes, thresholds and biases. XyloSim then runs it and is compared, every step, with the *source's own
values* (the float64 run of the graph, exact): the hidden spike counts, Isyn and Vmem, and the output spikes,
Isyn_out and Vmem_out. The verdict is ``bit_exact_vs_source``; spikec's reference is checked against XyloSim
too (``bit_exact``). The source's output population takes its input one step late, as the chip's does, so the
chip's step ``t`` is the source's step ``t`` throughout (the raster's extra empty step is not compared).

Form: ``input [T, B, C] -> xylo_lif (role hidden) -> xylo_lif (role output) -> output``; anything else, or a
network beyond the chip's limits, is refused by name.
"""
import numpy as np

from spikec.core.interpreter import run
from spikec.ir.graph import Graph, TensorType
from spikec.targets.xylo.limits import Chip
from spikec.targets.xylo.mapper import refuse

OP = "xylo_lif"
FORM = "input -> xylo.Hidden (recurrent allowed) -> xylo.Output -> output"
REMEDY = f"a spikec.nn.xylo network on Xylo is {FORM}: Sequential(xylo.Hidden(C, N), xylo.Output(N, M))"
STATES = {"spikes": "spikes", "isyn": "isyn", "vmem": "vmem"}   # the source's read -> the chip record (hidden)


def applies(graph: Graph) -> bool:
    """Every node but the input is a ``spikec.nn.xylo`` population."""
    rest = [n for n in graph.nodes if n.op != "input"]
    return bool(rest) and all(n.op == OP for n in rest)


def refuse_mixed(graph: Graph) -> None:
    """A ``spikec.nn.xylo`` population among other ops: refused by name (neither path maps it)."""
    pops = [n for n in graph.nodes if n.op == OP]
    other = next((n for n in graph.nodes if n.op not in ("input", OP)), None)
    if pops and other is not None:
        raise refuse(other, f"op {other.op!r} beside spikec.nn.xylo populations ({', '.join(n.name for n in pops)}): "
                            "Xylo takes xylo.Hidden and xylo.Output alone, or a network of framework neurons", REMEDY)


def _layers(graph: Graph):
    if len(graph.outputs) != 1:
        raise refuse(graph.outputs[-1] if graph.outputs else "output", f"{len(graph.outputs)} outputs; Xylo's "
                     "output layer is one population", REMEDY)
    out = graph.node(graph.outputs[0])
    hid = graph.node(out.inputs[0])
    if out.attrs["role"] != "output":
        raise refuse(out, "the graph's output is a xylo.Hidden population: Xylo's outputs are its output neurons",
                     REMEDY)
    if hid.op != OP or hid.attrs["role"] != "hidden":
        raise refuse(hid, "the output population is not fed by a xylo.Hidden population", REMEDY)
    inp = graph.node(hid.inputs[0])
    if inp.op != "input" or len(graph.inputs) != 1 or len(graph.consumers(hid.name)) != 1:
        raise refuse(hid, "Xylo has one hidden population between its input channels and its output neurons",
                     REMEDY)
    return inp, hid, out


def _check_limits(inp, hid, out, chip: Chip) -> None:
    n_in, nh, no = inp.type.shape[0], hid.type.shape[0], out.type.shape[0]
    for key, used, node in (("inputs", n_in, inp), ("hidden_neurons", nh, hid), ("output_neurons", no, out)):
        if used > chip[key]:
            raise refuse(node, f"{used} {key.replace('_', ' ')}: {chip.name} has {chip[key]} "
                               f"({chip.limits[key].source})", f"shrink the layer to at most {chip[key]}")
    fed = (("input_expansion_neurons", int(np.any(hid.params["weight"] != 0, 1).sum()), "receive input"),
           ("output_expansion_neurons", int(np.any(out.params["weight"] != 0, 0).sum()), "feed the outputs"))
    for key, used, what in fed:
        if key in chip.limits and used > chip[key]:
            raise refuse(hid, f"{used} hidden neurons {what}: {chip.name} allows {chip[key]} "
                              f"({chip.limits[key].source})", f"use at most {chip[key]} hidden neurons")


def spec_of(graph: Graph, chip: Chip, dt: float = 1e-3) -> dict:
    """The keyword arguments of ``XyloSim.from_specification``: the modules' integers as they are."""
    inp, hid, out = _layers(graph)
    _check_limits(inp, hid, out, chip)
    nh = hid.type.shape[0]
    i64 = lambda a, n=None: (np.broadcast_to(np.asarray(a), (n,)) if n else np.asarray(a)).astype(np.int64)
    no = out.type.shape[0]
    rec = hid.params.get("weight_rec", np.zeros((nh, nh)))
    return {
        "weights_in": i64(hid.params["weight"]).T.copy(), "weights_out": i64(out.params["weight"]).T.copy(),
        "weights_rec": i64(rec).T.copy(),
        "dash_mem": i64(hid.params["dash_mem"], nh), "dash_mem_out": i64(out.params["dash_mem"], no),
        "dash_syn": i64(hid.params["dash_syn"], nh), "dash_syn_2": np.zeros(nh, np.int64),
        "dash_syn_out": i64(out.params["dash_syn"], no),
        "threshold": i64(hid.params["threshold"], nh), "threshold_out": i64(out.params["threshold"], no),
        "bias": i64(hid.params["bias"], nh), "bias_out": i64(out.params["bias"], no),
        "weight_shift_in": np.int64(hid.attrs["weight_shift"]),
        "weight_shift_rec": np.int64(hid.attrs.get("rec_shift", 0)),
        "weight_shift_out": np.int64(out.attrs["weight_shift"]), "dt": np.float64(dt),
    }


def layer_names(graph: Graph) -> tuple[str, str]:
    _, hid, out = _layers(graph)
    return hid.name, out.name


def source_runs(graph: Graph, x: np.ndarray) -> list[dict]:
    """The source's values per sample, keyed as the chip's records (``spikes``, ``isyn``, ``vmem``, ``out``,
    ``isyn_out``, ``vmem_out``; [T, N] each): the float64 run of the graph with a read-out twin per state."""
    hid, out = layer_names(graph)
    twins = [graph.node(n).with_(name=f"{n}.{r}", attrs=dict(graph.node(n).attrs, read=r),
                                 type=TensorType(graph.node(n).type.shape))
             for n in (hid, out) for r in ("isyn", "vmem")]
    g = Graph(graph.nodes + tuple(twins), graph.outputs, graph.meta)
    v = run(g, {graph.inputs[0].name: np.asarray(x, np.float64)}, record="all").values
    keys = {"spikes": hid, "isyn": f"{hid}.isyn", "vmem": f"{hid}.vmem", "out": out, "isyn_out": f"{out}.isyn",
            "vmem_out": f"{out}.vmem"}
    return [{k: np.asarray(v[name][:, b], np.float64).reshape(v[name].shape[0], -1) for k, name in keys.items()}
            for b in range(np.asarray(x).shape[1])]


def vs_source(chip_runs: list[dict], src: list[dict]) -> dict:
    """The chip's first T steps against the source's T steps, every state, bit for bit."""
    first, values = [], 0
    for i, (c, s) in enumerate(zip(chip_runs, src)):
        for k, want in s.items():
            got = c[k][: want.shape[0]]
            values += want.size
            if got.shape != want.shape or not np.array_equal(got, want):
                bad = np.argwhere(got != want)[0] if got.shape == want.shape else None
                first.append(f"sample {i} {k}: " + (f"step {bad[0]} neuron {bad[1]}: chip {got[tuple(bad)]} vs "
                                                    f"source {want[tuple(bad)]:g}" if bad is not None
                                                    else f"shape {got.shape} vs {want.shape}"))
    return {"bit_exact_vs_source": not first and len(chip_runs) == len(src), "values_compared_vs_source": values,
            "first_mismatches_vs_source": first[:5]}
