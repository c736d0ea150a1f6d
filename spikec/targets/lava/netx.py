"""netx HDF5 export (``OUTDIR/model.net``): the path of a deployment to Loihi 2 hardware.

netx (lava-dl 0.6.0, ``lava/lib/dl/netx/hdf5.py``) builds, per layer, a synapse (Dense/Conv) and Lava's
LIF (``type: CUBA``; ``du = iDecay - 1``, ``dv = vDecay``, ``vth = vThMant``, bias exponent fixed at 6).
It knows input, dense, conv and flatten layers; no pooling, no soft reset, no read-out. So a graph
exports when every population is Lava's LIF (hard reset, scalar parameters) with biases in whole
weight LSBs, and its outputs are spikes; ``export_info`` names the nodes that prevent it otherwise.

What netx runs differs from spikec's Lava deployment in two documented ways, and the verification
uses an integer reference that has both (``netx_reference``), so the comparison stays bit for bit:

- weight factor ``f``: netx feeds dense weights through ``optimize_weight_bits`` and builds conv
  synapses as given; mixed-sign weights are written as ``2 w`` (even, as slayer writes them: Loihi
  drops the LSB of mixed-sign 8-bit weights) and netx delivers ``a = sum(2 w)``, so that population's
  threshold and bias are written times ``f = 2`` (``f = 1`` for single-sign dense weights);
- free-running pipeline: the netx network has no bias switch, so a population ``L`` synapses deep
  integrates its bias for ``L`` steps before its first input arrives. The netx reference puts a
  one-step ``delay`` after every synapse and runs ``T + L_max`` steps on zero-padded inputs.

Loading needs lava-dl's netx, whose ``hdf5.py`` imports ``lava.lib.dl.slayer`` only for RF neurons;
slayer needs torchvision and matplotlib, which do not import here beside torch 2.13. When slayer
cannot import, ``import_netx`` installs a stub ``lava.lib.dl.slayer.neuron.rf`` (RF neurons raise)
and says so.
"""
import sys
import types
from pathlib import Path

import numpy as np

from spikec.ir.graph import Graph, Node

NETX_OPS = ("input", "lava_conv", "lava_dense", "flatten", "lava_lif")


def structural_blocking(q: Graph) -> list[dict]:
    """Nodes preventing netx export, ignoring the bias rule (which requantization can meet)."""
    blocking = []
    for n in q.nodes:
        if n.op not in NETX_OPS:
            blocking.append({"node": n.name, "op": n.op,
                             "why": "not in netx's vocabulary (input, dense, conv, flatten, CUBA neurons)"
                                    + (": a real-valued read-out" if n.op == "lava_readout" else "")})
        elif n.op == "lava_lif" and "bias_u" in n.params:
            blocking.append({"node": n.name, "op": n.op,
                             "why": "a current bias (a Dense from an always-firing LIF into its a_in, or SpikecLIF): "
                                    "netx's CUBA layers bias v only"})
        elif n.op == "lava_lif" and n.attrs.get("process") != "LIF":
            blocking.append({"node": n.name, "op": n.op,
                             "why": f"{n.attrs['reset']}-reset LIF with per-channel leak or soft reset runs in "
                                    "spikec's custom SpikecLIF process; netx builds only Lava's LIF"})
        elif n.op == "lava_lif" and (n.attrs.get("recurrent") or "reset_weight" in n.params):
            blocking.append({"node": n.name, "op": n.op,
                             "why": ("a recurrent population" if n.attrs.get("recurrent") else
                                     "a subtract reset with the membrane in u (current_reset.py)")
                                    + " (a self-synapse from its s_out to its a_in): netx's network is a "
                                      "feed-forward chain of blocks"})
        elif n.op == "input" and n.type.kind != "binary":
            blocking.append({"node": n.name, "op": n.op, "why": "graded inputs are not exported"})
    return blocking


def _bias_v(n: Node) -> np.ndarray:
    return np.asarray(n.params["bias_mant"]) << np.asarray(n.params["bias_exp"])


def export_info(q: Graph) -> dict:
    blocking = structural_blocking(q)
    for n in q.nodes:
        if n.op == "lava_lif" and np.any(_bias_v(n) % 64):
            blocking.append({"node": n.name, "op": n.op,
                             "why": "netx fixes the bias exponent at 6: biases must be multiples of 64"})
    if not blocking:
        for d in layers(q):
            if d["vThMant"] > 2 ** 17 - 1 or np.abs(d["bias"]).max(initial=0) > 4095:
                blocking.append({"node": d["pop"].name, "op": "lava_lif",
                                 "why": f"threshold x{d['factor']} or bias exceeds netx/Loihi ranges "
                                        "(vThMant 17 bits, bias mantissa 13 bits)"})
    return {"exportable": not blocking, "blocking_nodes": blocking, "written": None if blocking else "model.net"}


def _factor(n: Node) -> int:
    """netx's synaptic sum over spikec's for this synapse (see module docstring)."""
    w = np.asarray(n.params["weight"])
    if n.op == "lava_dense":
        return 2 if n.attrs.get("weight_exp", 0) == -1 else 1
    return 2 if (w.min() < 0 < w.max()) else 1


def _file_weight(n: Node) -> np.ndarray:
    w = np.asarray(n.params["weight"], dtype=np.int64)
    if n.op == "lava_dense":
        return w                               # already 2w (mixed, weight_exp -1) or w (single sign)
    return w * _factor(n)


def layers(q: Graph) -> list[dict]:
    """netx layers: one per synapse + LIF pair, in order, with file values."""
    out = []
    for n in q.nodes:
        if n.op not in ("lava_conv", "lava_dense"):
            continue
        pop = next(c for c in q.nodes if c.inputs == (n.name,) and c.op == "lava_lif")
        f = _factor(n)
        c = n.type.shape[0]
        bias = np.broadcast_to(_bias_v(pop), (c,)) * f
        d = {"syn": n, "pop": pop, "factor": f, "type": "conv" if n.op == "lava_conv" else "dense",
             "shape": list(n.type.shape), "weight": _file_weight(n), "bias": (bias // 64).astype(np.int64),
             "vThMant": int(pop.params["vth"]) * f, "iDecay": int(pop.params["du"]) + 1,
             "vDecay": int(pop.params["dv"]), "flatten_before": q.node(n.inputs[0]).op == "flatten"}
        if n.op == "lava_conv":
            d.update({k: list(n.attrs[k]) for k in ("stride", "padding", "dilation")}, groups=n.attrs["groups"])
        out.append(d)
    return out


def write(q: Graph, path) -> None:
    import h5py
    inp = q.inputs[0]
    with h5py.File(path, "w") as f:
        g = f.create_group("layer")
        g0 = g.create_group("0")
        g0.create_dataset("type", data=np.bytes_("input"))
        g0.create_dataset("shape", data=np.array(inp.type.shape))   # shape-only: no neuron, no input port issue
        i = 1
        for d in layers(q):
            if d["flatten_before"]:
                gi = g.create_group(str(i))
                gi.create_dataset("type", data=np.bytes_("flatten"))
                i += 1
            gi = g.create_group(str(i))
            gi.create_dataset("type", data=np.bytes_(d["type"]))
            gi.create_dataset("shape", data=np.array(d["shape"]))
            gi.create_dataset("weight", data=d["weight"])
            gi.create_dataset("bias", data=d["bias"])
            if d["type"] == "conv":
                for k in ("stride", "padding", "dilation"):
                    gi.create_dataset(k, data=np.array(d[k]))
                gi.create_dataset("groups", data=d["groups"])
            nr = gi.create_group("neuron")
            nr.create_dataset("type", data=np.bytes_("CUBA"))
            for k in ("iDecay", "vDecay", "vThMant"):
                nr.create_dataset(k, data=d[k])
            nr.create_dataset("refDelay", data=1)
            nr.create_dataset("gradedSpike", data=False)
            i += 1


def netx_reference(q: Graph) -> Graph:
    """The integer reference of what netx builds from ``model.net``: file values, one-step delay per synapse."""
    nodes, rename = [], {}
    info = {d["pop"].name: d for d in layers(q)}
    for n in q.nodes:
        ins = tuple(rename.get(i, i) for i in n.inputs)
        if n.op in ("lava_conv", "lava_dense"):
            attrs = dict(n.attrs, **({"weight_exp": 0} if n.op == "lava_dense" else {}))
            nodes.append(n.with_(inputs=ins, attrs=attrs, params={"weight": _file_weight(n)}))
            nodes.append(Node(n.name + ".pipeline", "delay", (n.name,), n.type, {"steps": 1}))
            rename[n.name] = n.name + ".pipeline"
        elif n.op == "lava_lif":
            d = info[n.name]
            params = {"du": np.int64(d["iDecay"] - 1), "dv": np.int64(d["vDecay"]), "vth": np.int64(d["vThMant"]),
                      "bias_mant": d["bias"], "bias_exp": np.full(d["bias"].shape, 6, dtype=np.int64)}
            nodes.append(n.with_(inputs=ins, params=params))
        else:
            nodes.append(n.with_(inputs=ins))
    return Graph(tuple(nodes), q.outputs, dict(q.meta, netx=True))


def import_netx():
    """``lava.lib.dl.netx.hdf5`` and a note saying whether slayer had to be stubbed."""
    from spikec.targets.lava._shim import import_lava
    import_lava()
    note = "lava-dl slayer imported"
    if "lava.lib.dl.slayer.neuron.rf" not in sys.modules:
        try:
            import lava.lib.dl.slayer.neuron.rf  # noqa: F401
        except Exception as e:   # torchvision / matplotlib missing or broken beside torch 2.13
            for name in [m for m in sys.modules if m.startswith("lava.lib.dl.slayer")]:
                del sys.modules[name]
            pkg = types.ModuleType("lava.lib.dl.slayer")
            pkg.__path__ = []
            neuron = types.ModuleType("lava.lib.dl.slayer.neuron")
            neuron.__path__ = []
            rf = types.ModuleType("lava.lib.dl.slayer.neuron.rf")

            def neuron_params(*a, **k):
                raise NotImplementedError("RF neurons need lava-dl's slayer, which does not import here")
            rf.neuron_params = neuron_params
            sys.modules.update({"lava.lib.dl.slayer": pkg, "lava.lib.dl.slayer.neuron": neuron,
                                "lava.lib.dl.slayer.neuron.rf": rf})
            note = (f"lava-dl slayer does not import here ({type(e).__name__}: {e}); netx loaded with a stub "
                    "lava.lib.dl.slayer.neuron.rf (used only by RF neurons, which this export never writes)")
    else:
        note = "lava-dl slayer stubbed earlier in this process"
    from lava.lib.dl.netx import hdf5
    return hdf5, note


def run_netx(path, x: np.ndarray, steps: int, workdir: Path) -> dict:
    """Load ``model.net`` with netx and run one sample ``x`` ``[T, *ir]``: every layer's spikes (all steps)
    and final ``v``, ``u``. Runs Lava in this process: call it through ``supervisor.run("netx", ...)``
    (as ``verify`` does), which runs it in ``runner.py``."""
    from spikec.targets.lava.layout import to_lava
    hdf5, note = import_netx()
    from lava.magma.core.run_conditions import RunSteps
    from lava.magma.core.run_configs import Loihi2SimCfg
    from lava.proc.io.source import RingBuffer
    from spikec.targets.lava.procs.process import Recorder, StateProbe

    net = hdf5.Network(net_config=str(path))
    data = np.zeros(tuple(to_lava(np.zeros(x.shape[1:])).shape) + (steps,), dtype=np.int64)
    for t in range(x.shape[0]):
        data[..., t] = to_lava(x[t])
    port = tuple(net.inp.shape)
    if port != data.shape[:-1] and int(np.prod(port)) == int(np.prod(data.shape[:-1])):
        # an image input read flattened by netx's first Dense: the model.net weights take the IR's (C, H, W)
        # flatten order, so the source sends each step flattened in that order
        data = np.zeros(port + (steps,), dtype=np.int64)
        for t in range(x.shape[0]):
            data[..., t] = np.asarray(x[t]).reshape(port)
    src = RingBuffer(data=data)
    src.s_out.connect(net.inp)
    files, aux = {}, []
    for i, layer in enumerate(net.layers):
        files[("spikes", i)] = workdir / f"netx{i}.npy"
        aux.append(Recorder(shape=layer.neuron.s_out.shape, steps=steps, path=files[("spikes", i)]))
        layer.neuron.s_out.connect(aux[-1].a_in)
        for var in ("v", "u"):
            files[(var, i)] = workdir / f"netx{i}.{var}.npy"
            aux.append(StateProbe(var=getattr(layer.neuron, var), step=steps, path=files[(var, i)]))
    try:
        src.run(condition=RunSteps(num_steps=steps), run_cfg=Loihi2SimCfg(select_tag="fixed_pt"))
    finally:
        src.stop()
    return {"files": files, "layers": len(net.layers), "note": note, "table": str(net)}


def _compare_sample(pops, trace, files, b, steps) -> tuple[int, int, list]:
    """Sample ``b``'s netx recordings against the reference trace: ``(spikes, states compared, mismatches)``."""
    from spikec.targets.lava.layout import to_lava
    compared = states = 0
    mismatches = []
    for i, name in enumerate(pops):
        got = np.load(files[("spikes", i)])
        exp = np.stack([to_lava(trace.values[name][s, b]) for s in range(steps)], axis=-1)
        compared += exp.size
        if not np.array_equal(got, exp):
            pos = tuple(int(v) for v in np.argwhere(got != exp)[0])
            mismatches.append({"node": name, "sample": b, "lava_index": list(pos[:-1]), "step": pos[-1],
                               "expected": int(exp[pos]), "got": int(got[pos])})
        for var in ("v", "u"):
            got = np.load(files[(var, i)])
            exp = to_lava(trace.values[f"{name}.{var}"][steps - 1, b])
            states += exp.size
            if not np.array_equal(got, exp):
                mismatches.append({"node": name, "sample": b, "what": f"final_{var}"})
    return compared, states, mismatches


def verify(q: Graph, path, x: np.ndarray, samples: int = 1) -> dict:
    """Load ``path`` with netx, run the first ``samples`` samples of ``x`` ``[T, B, ...]`` and compare every
    layer's spikes at every step and the final states with ``netx_reference(q)`` bit for bit."""
    from spikec.core.interpreter import run
    from spikec.targets.lava.calibrate import measure
    from spikec.targets.lava.ops import with_readouts
    ref_graph = netx_reference(q)
    pops = [d["pop"].name for d in layers(q)]
    depth = len(pops)
    t = x.shape[0]
    steps = t + depth
    xs = np.zeros((steps,) + x.shape[1:], dtype=np.int64)
    xs[:t] = x
    xs = xs[:, :samples]
    trace = run(with_readouts(ref_graph), {q.inputs[0].name: xs}, integer=True)
    peaks, _ = measure(ref_graph, {q.inputs[0].name: xs})
    compared = states = 0
    mismatches, note, table = [], "", ""
    if xs.shape[1]:
        from spikec.targets.lava import supervisor
        with supervisor.workdir("spikec-netx-") as workdir:   # netx runs Lava: in a supervised session
            np.save(workdir / "x.npy", xs)
            r = supervisor.run("netx", workdir, {"path": str(Path(path).resolve()), "steps": steps})
            for b, sample in enumerate(r["samples"]):
                files = {(what, i): workdir / rel for what, i, rel in sample["files"]}
                note, table = sample["note"], sample["table"]
                c, st, m = _compare_sample(pops, trace, files, b, steps)
                compared, states, mismatches = compared + c, states + st, mismatches + m
    return {"loaded": True, "bit_exact": not mismatches, "samples": int(xs.shape[1]), "steps": steps,
            "spikes_compared": compared, "states_compared": states, "first_mismatches": mismatches[:10],
            "reference": "netx_reference: file values (weight factor f, vThMant and bias times f), a one-step "
                         "delay per synapse, biases from step 1, T + depth steps on zero-padded inputs",
            "overflow": any(p["overflow_events"] for p in peaks.values()),
            "loader_note": note, "netx_table": table}
