"""Deploy exactly what was trained: a model built only of ``spikec.nn.loihi`` modules.

Their forward *is* Loihi 2's fixed-point arithmetic (``spikec/nn/loihi.py``), and the frontend maps them onto
integer IR nodes that a float64 run repeats bit for bit (``spikec/frontend/loihi.py``; the compiler checks the
traced and the deployed graph against the module's forward). So the Lava target needs no calibration here: it
takes the integers as they are (8-bit weight mantissas and ``weight_exp``, ``du``/``dv``/``vth``, bias mantissa
and exponent), lowers them to Lava processes, runs Lava's fixed-point simulation and compares it, bit for bit,
with the *source's own values*: every population's spikes and every read-out at every step, and the final
``u``/``v`` of every population, taken from the float64 run of the source-equivalent graph (the module's forward).
The verdict is ``bit_exact_vs_source``.

Mapping (node names kept, so a mismatch names the source layer):

  conv2d (loihi.Conv2d)       -> lava_conv, weight ``W << weight_exp`` (Lava's Conv has no exponent)
  linear (loihi.Dense)        -> lava_dense, the mantissas and ``weight_exp`` (Lava applies its sign-mode rule:
                                 the module's mantissas are already a fixed point of it); ``linear`` then
                                 ``loihi_shift`` (a negative exponent) is one lava_dense
  loihi_lif                   -> lava_lif: Lava's LIF process for the hard reset with scalar du/dv/vth and no
                                 current bias, else SpikecLIF (subtract reset, per-channel values, a Dense bias
                                 as the current bias ``bias_u``)
  a synapse feeding no neuron -> its sum through a read-out process (``lava_readout``, the Dense bias)
  flatten                     -> kept (a layout change)

A model with any other synapse, neuron or op (or real-valued inputs) is not exact-source: the target
calibrates it as before (``bit_exact_vs_source: false``, with the float-vs-fixed agreement).
"""
import time

import numpy as np

from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets import TargetResult
from spikec.targets.lava import ops as lops  # noqa: F401  (defines the Lava integer ops)
from spikec.targets.lava.compare import compare
from spikec.targets.lava.lower import lower
from spikec.targets.lava.ops_table import entry, having
from spikec.targets.lava.simulate import run_lava

STRUCTURAL = ("input", "flatten")
LOWERS = {op: entry(op).exact_source for op in having("exact_source")}   # the ops only this deployment lowers
# (ops_table.py; spikec/targets/coverage.py reads it beside vocabulary.LOWERINGS)
NEURONS = having("exact_source_neuron")   # spikec.nn.loihi's LIF
LIF_KEYS = ("du", "dv", "vth", "bias_mant", "bias_exp")


def blocking_nodes(graph: Graph) -> list[str]:
    """The nodes that keep ``graph`` from being deployed exactly (empty: every synapse and neuron is loihi)."""
    out = [f"{n.name} ({n.op})" for n in graph.nodes if n.op not in STRUCTURAL and "loihi" not in n.attrs]
    out += [f"{n.name} (real-valued input)" for n in graph.inputs if n.type.kind != "binary"]
    return out


def applies(graph: Graph) -> bool:
    return any("loihi" in n.attrs for n in graph.nodes) and not blocking_nodes(graph)


def _ints(a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    r = np.rint(a)
    if not np.array_equal(r, a):
        raise ValueError("not integers")   # the converters only emit integers: a bug if it happens
    return r.astype(np.int64)


class _Builder:
    """The integer graph of an exact-source model, node by node."""

    def __init__(self, graph: Graph):
        self.g = graph
        self.nodes, self.names = [], {}     # source name -> integer node name (a shift maps to its dense)
        self.bias = {}                      # integer synapse name -> its integer bias (N,)
        feeds = {i for n in graph.nodes if n.op in NEURONS for i in n.inputs}
        self.readouts = [n.name for n in graph.nodes if n.op in ("linear", "conv2d", "loihi_shift")
                         and n.name not in feeds and not n.attrs["loihi"].get("summed_only")]

    def add(self, node: Node, src: str | None = None):
        self.nodes.append(node)
        self.names[src or node.name] = node.name

    def synapse_name(self, name: str) -> str:
        return f"{name}.synapse" if name in self.readouts else name

    def build(self) -> Graph:
        for n in self.g.nodes:
            getattr(self, "_" + n.op)(n)
        outs = []
        for name in self.readouts:
            syn = self.names[name]
            b = self.bias.get(syn, np.zeros(self.g.node(name).type.shape[0], dtype=np.int64))
            self.add(Node(name, "lava_readout", (syn,), TensorType(self.g.node(name).type.shape), {},
                          {"bias": b}, self.g.node(name).scope), name)
        outs = tuple(self.names[o] for o in self.g.outputs)
        meta = {"quantized_for": "lava", "exact_source": True, "source_outputs": list(self.g.outputs)}
        return Graph(tuple(self.nodes), outs, meta)

    def _input(self, n):
        self.add(n)

    def _flatten(self, n):
        self.add(n.with_(inputs=tuple(self.names[i] for i in n.inputs)))

    def _conv2d(self, n):
        a = n.attrs
        attrs = {"stride": list(a["stride"]), "padding": list(a["padding"]), "dilation": list(a["dilation"]),
                 "groups": a["groups"], "num_message_bits": 0}
        self.add(Node(self.synapse_name(n.name), "lava_conv", (self.names[n.inputs[0]],), TensorType(n.type.shape),
                      attrs, {"weight": _ints(n.params["weight"])}, n.scope), n.name)

    def _linear(self, n):
        e = n.attrs["loihi"]["weight_exp"]
        w = _ints(n.params["weight"])
        mant = w if e < 0 else w >> e   # linear holds W << weight_exp: Lava gets W and the exponent
        name = n.name if n.attrs["loihi"].get("summed_only") else self.synapse_name(n.name)
        self.add(Node(name, "lava_dense", (self.names[n.inputs[0]],), TensorType(n.type.shape),
                      {"weight_exp": int(e), "num_message_bits": 0}, {"weight": mant}, n.scope), n.name)
        if "bias" in n.params:
            self.bias[name] = _ints(n.params["bias"])

    def _loihi_shift(self, n):
        dense = self.names[n.inputs[0]]
        if n.name in self.readouts:   # the readout reads the dense under the shift's (source) name
            i = next(k for k, m in enumerate(self.nodes) if m.name == dense)
            self.nodes[i] = self.nodes[i].with_(name=f"{n.name}.synapse")
            dense = f"{n.name}.synapse"
        self.names[n.name] = dense
        if "bias" in n.params:
            self.bias[dense] = _ints(n.params["bias"])

    def _loihi_lif(self, n):
        syn = self.names[n.inputs[0]]
        p = {k: _ints(n.params[k]) for k in LIF_KEYS}
        if syn in self.bias:
            p["bias_u"] = self.bias[syn]
        # a current bias reaches Lava's LIF through a Dense from an always-firing LIF (current_bias.py), or the
        # lowering keeps SpikecLIF and says why
        lava_lif = n.attrs["reset"] == "zero" and all(p[k].ndim == 0 for k in ("du", "dv", "vth"))
        self.add(Node(n.name, "lava_lif", (syn,), TensorType(n.type.shape, "binary"),
                      {"reset": n.attrs["reset"], "output": "spikes", "process": "LIF" if lava_lif else "SpikecLIF"},
                      p, n.scope))


def integer_graph(graph: Graph) -> Graph:
    """The Lava integer graph of an exact-source model: its own integers, no calibration."""
    return _Builder(graph).build()


def source_values(graph: Graph, x: dict) -> dict:
    """The source's values by node name, and ``<population>.u`` / ``.v`` (float64 run of the graph, exact)."""
    twins = [n.with_(name=f"{n.name}.{r}", attrs=dict(n.attrs, read=r), type=TensorType(n.type.shape))
             for n in graph.nodes if n.op in NEURONS for r in ("u", "v")]
    g = Graph(graph.nodes + tuple(twins), graph.outputs, graph.meta)
    trace = run(g, {k: np.asarray(v, dtype=np.float64) for k, v in x.items()}, record="all")
    return dict(trace.values)


class _Values:
    """What ``compare`` reads: ``values`` by integer node name."""

    def __init__(self, values):
        self.values = values


def check(graph: Graph, q: Graph, net: dict, arrays: dict, x: dict) -> dict:
    """Run Lava on ``x`` and compare it with the source's values, bit for bit (``compare``'s report)."""
    xi = {k: (np.asarray(v) != 0).astype(np.int64) for k, v in x.items()}
    src = source_values(graph, x)
    values = {name: src[name] for name in src}
    lava = run_lava(net, arrays, xi)
    steps = next(iter(xi.values())).shape[0]
    result = compare(net, _Values(values), lava, steps)
    result.update(sim_seconds=lava["sim_seconds"], build_seconds=lava["build_seconds"], values=_Values(values))
    return result


def compile_exact(graph: Graph, inputs, reference, options) -> TargetResult:
    """The Lava target on an exact-source model: deploy its integers, prove Lava equal to the source."""
    start = time.perf_counter()
    q = integer_graph(graph)
    net, arrays = lower(q)
    x = inputs if isinstance(inputs, dict) else {graph.inputs[0].name: inputs}
    result = check(graph, q, net, arrays, x)
    layers = {n.name: {"op": n.op, **({"weight_exp": n.attrs["weight_exp"]} if n.op == "lava_dense" else {}),
                       **({"process": n.attrs["process"]} if n.op == "lava_lif" else {})}
              for n in q.nodes if n.op.startswith("lava_")}
    report = {
        "name": "lava", "bit_exact": result["bit_exact"], "bit_exact_vs_source": result["bit_exact"],
        "exact_source": True,
        "compared_with": "the source model's own forward (spikec.nn.loihi modules: the float64 run of the graph the "
                         "compiler proved equal to the forward; every population's spikes and read-out at every "
                         "step, and the final u, v of every population)",
        "calibration": "none: every synapse and neuron is a spikec.nn.loihi module; their integers are deployed as "
                       "they are",
        "simulator": "Lava 0.10.0 Loihi2SimCfg(select_tag='fixed_pt')", "claim": net["claim"],
        **{k: result[k] for k in ("steps_compared", "spikes_compared", "values_compared", "states_compared",
                                  "mismatch_counts", "first_divergent_layer", "first_mismatches")},
        "sim_seconds": result["sim_seconds"], "build_seconds": result["build_seconds"],
        "processes": [{"name": p["name"], "type": p["type"], "latency": p.get("latency")} for p in net["processes"]],
        "layers": layers,
        "seconds": round(time.perf_counter() - start, 3),
    }
    report["summary"] = summary(report)
    from spikec.targets.lava import standard_readout
    standard_readout.add_to_report(report, net, q, result["values"])
    from spikec.targets.lava.written import LavaDir
    files = {"lava": LavaDir(lambda p: _write(p, q, net, arrays), q, net, arrays)}   # its reader: compile_lava
    from spikec.targets.lava.standard_readout import readouts_ok
    return TargetResult(report, result["bit_exact"] and readouts_ok(report.get("standard_readouts")), files)


def summary(r: dict) -> str:
    verdict = str(r["bit_exact_vs_source"]).lower()
    where = "" if r["bit_exact_vs_source"] else f" (first divergent layer {r['first_divergent_layer']})"
    return (f"lava: bit_exact_vs_source {verdict}{where}: Lava's fixed-point simulation against the source model's "
            f"own forward (spikec.nn.loihi, no calibration): {r['spikes_compared']:,} spikes, "
            f"{r['values_compared']:,} read-out values, {r['states_compared']:,} final states over "
            f"{r['steps_compared']} steps (Lava fixed_pt sim {r['sim_seconds']:.2f} s)")


def _write(path, q, net, arrays):
    """``lava/quantized`` (the integer graph deployed) and the process network, as the calibrated path writes them."""
    from pathlib import Path
    from spikec.core.serialize import save_graph
    from spikec.targets.lava.lower import save_network
    (Path(path) / "quantized").mkdir(parents=True, exist_ok=True)
    save_graph(q, Path(path) / "quantized")
    save_network(net, arrays, Path(path))


def float_report_fields(graph: Graph) -> dict:
    """For a calibrated deployment: why the source is not the deployed arithmetic."""
    blocking = blocking_nodes(graph)
    return {"bit_exact_vs_source": False,
            "vs_source": "approximate (calibrated quantization; see float_vs_fixed): not every synapse and neuron is "
                         "a spikec.nn.loihi module (" + ", ".join(blocking[:4])
                         + (f" and {len(blocking) - 4} more" if len(blocking) > 4 else "") + ")"}


def verify_exact(graph: Graph, inputs, q_written: Graph, net: dict, arrays: dict) -> dict:
    """``spikec verify`` of an exact-source deployment: the written integer graph must be the one derived from
    ``graph.json`` (no calibration: node by node, bit for bit), the written arrays its lowering, and the written
    Lava network must reproduce the source's values on ``inputs``, as at compile time."""
    from spikec.core.serialize import graph_to_json
    from spikec.targets.lava.lower import lower
    q = integer_graph(graph)
    rederived = graph_to_json(q) == graph_to_json(q_written) and all(
        n.name in q_written and all(np.array_equal(v, q_written.node(n.name).params.get(k)) for k, v in n.params.items())
        for n in q.nodes)
    from spikec.targets.lava import standard_readout
    from spikec.targets.lava.standard_readout import readouts_ok
    from spikec.targets.lava.written import network_differences
    fresh_net, fresh = lower(q_written)
    lowered = [k for k in sorted(set(fresh) | set(arrays))
               if k not in fresh or k not in arrays or not np.array_equal(fresh[k], arrays[k])]
    lowered += network_differences(fresh_net, net)   # the document too (a process type, a read-out's state read)
    x = inputs if isinstance(inputs, dict) else {graph.inputs[0].name: inputs}
    result = check(graph, q_written, net, arrays, x)
    readouts = standard_readout.measured(net, q_written, result["values"])
    return {"equivalent": bool(result["bit_exact"] and rederived and not lowered and readouts_ok(readouts)),
            **({"standard_readouts": readouts} if readouts else {}),
            "bit_exact": result["bit_exact"], "bit_exact_vs_source": result["bit_exact"], "exact_source": True,
            "quantized_rederived": {"equal": rederived}, "arrays_differing_from_lowering": lowered,
            "spikes_compared": result["spikes_compared"], "values_compared": result["values_compared"],
            "states_compared": result["states_compared"], "max_rel_diff": 0.0,
            "first_divergent_layer": result["first_divergent_layer"], "mismatch_counts": result["mismatch_counts"],
            "first_mismatches": result["first_mismatches"], "sim_seconds": result["sim_seconds"]}
