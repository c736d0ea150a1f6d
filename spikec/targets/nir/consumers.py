"""Run a written ``.nir`` file through the real importers: snnTorch 1.0.0, Norse 1.1.0, Sinabs 3.1.3, SpikingJelly
2.0.0 and Rockpool 3.1.0 (``rockpool_consumer``).

``limits(graph)`` lists, per consumer, why it cannot reproduce the file (read from the importers'
source, see targets.md "NIR"); an empty list means it should. ``run_consumer`` imports the file with the
consumer's own entry point and runs it on the whole batch at once (SpikingJelly always; snnTorch and Norse when
the file has no Flatten), else one sample at a time and *unbatched* (a per-step tensor shaped like the NIR input
type): NIR types and Flatten dims are batch-free, and both importers hand ``Flatten(start_dim, end_dim)`` to
``torch.nn.Flatten`` unchanged, which counts the batch dim. Rockpool runs ``[B, T, N]`` in one call. Spiking
modules are hooked, so every NIR neuron's spikes are compared, not only the graph output.
Consumers run as they ship: float32 parameters and state.
"""
import copy
import contextlib
import io
import logging
import warnings

import nir
import numpy as np
import torch

from spikec.formats.nir import hdf5
from spikec.targets.nir import rockpool_consumer

CONSUMERS = ("snntorch", "norse", "sinabs", "spikingjelly", "rockpool")
# run on the whole batch at once: SpikingJelly's importer adds 1 to a Flatten's dims (it counts the batch dim)
BATCHED = ("spikingjelly",)
# spikingjelly/activation_based/nir_exchange/from_nir.py (2.0.0) ``_NodeMapper.map_dict``
SJ_NODES = ("Input", "Output", "Affine", "Linear", "Conv1d", "Conv2d", "AvgPool2d", "Flatten", "IF", "LIF", "CubaLIF")
SNNTORCH_NODES = ("Input", "Output", "Affine", "Linear", "Conv2d", "Flatten", "AvgPool2d", "LIF", "CubaLIF")
NORSE_NODES = ("Input", "Output", "Affine", "Linear", "Conv2d", "Flatten", "LIF", "IF", "CubaLIF")
# sinabs/nir.py ``_import_sinabs_module``: any other node maps to None, which nirtorch's load cannot call
SINABS_NODES = ("Input", "Output", "Affine", "Conv1d", "Conv2d", "LI", "IF", "LIF", "SumPool2d", "Flatten")
SINABS_NEURON = ("Sinabs's {cls} subtracts the threshold on the spiking step (MembraneSubtract), fires on >= and "
                 "several spikes per step (MultiSpike){clip}; NIR's {kind} resets to v_reset")
SINABS_TAU = "Sinabs reads tau in time steps (alpha = exp(-1/tau) in float32), not NIR's 1 - dt/tau"


def _kind(node) -> str:
    return type(node).__name__


def _uniform(a) -> bool:
    a = np.asarray(a, dtype=np.float64)
    return a.size == 0 or bool((a == a.reshape(-1)[0]).all())


def file_scheme(graph: nir.NIRGraph) -> str | None:
    """The discretization scheme a file's metadata names (spikec writes it), or None."""
    meta = graph.metadata if isinstance(graph.metadata, dict) else {}
    v = meta.get("scheme")
    return v.decode() if isinstance(v, bytes) else (None if v is None else str(v))


SINABS_SCHEME = ("the file is written in the consumer scheme 'sinabs' (its metadata): its LIF/IF are Sinabs's "
                 "MultiSpike subtract-reset neurons emitting spike counts, which {who} runs as NIR's one-spike, "
                 "reset-to-v_reset neurons")


def limits(graph: nir.NIRGraph, dt: float) -> dict[str, list[str]]:
    """Per consumer, every construct in ``graph`` that it cannot run exactly (empty: it can)."""
    if file_scheme(graph) == "sinabs":
        return _sinabs_scheme_limits(graph)
    out = {"snntorch": [], "norse": [], "sinabs": _sinabs_limits(graph), "spikingjelly": _sj_limits(graph, dt),
           "rockpool": rockpool_consumer.limits(graph, executor_limits, _reaches)}
    snn, nor = out["snntorch"], out["norse"]
    if abs(dt - 1e-4) > 1e-4 * 1e-12:
        snn.append(f"dt = {dt:g}: snnTorch's importer hard-codes dt = 1e-4")
    n_in = sum(isinstance(n, nir.Input) for n in graph.nodes.values())
    n_out = sum(isinstance(n, nir.Output) for n in graph.nodes.values())
    if n_in != 1 or n_out != 1:   # the NIR target runs a file of several outputs one output at a time instead
        for lst in (snn, nor):
            lst.append(f"{n_in} inputs and {n_out} outputs: nirtorch runs graphs with one of each (the NIR target "
                       "runs each output's part, one_output_parts)")
    for name, node in graph.nodes.items():
        k = _kind(node)
        where = f"node {name!r} ({k})"
        if k not in SNNTORCH_NODES:
            snn.append(f"{where}: " + (_snntorch_if(node) if k == "IF" else "import_from_nir has no mapping for it "
                                                                            "(raises)"))
        if k not in NORSE_NODES:
            nor.append(f"{where}: from_nir has no mapping for it (drops it)")
        if k == "LIF":
            gain = node.r * 1e-4 / node.tau
            if not np.allclose(node.v_leak, 0):
                snn.append(f"{where}: v_leak != 0 (snnTorch asserts v_leak = 0)")
                nor.append(f"{where}: v_leak != 0 (Norse starts the state at v_leak, not 0)")
            if not np.allclose(node.v_reset, 0):
                snn.append(f"{where}: v_reset != 0 (snnTorch resets to 0)")
                nor.append(f"{where}: v_reset != 0 (Norse resets to 0)")
            if not np.all(node.r == 1):
                nor.append(f"{where}: r != 1 (Norse ignores r)")
            if not _uniform(node.v_threshold):
                snn.append(f"{where}: v_threshold varies across neurons (snnTorch asserts one value)")
            elif not _uniform(node.v_threshold / gain):
                snn.append(f"{where}: v_threshold/(r dt/tau) varies across neurons (snnTorch keeps one threshold, "
                           "divided by the first r dt/tau)")
            beta = 1 - 1e-4 / node.tau
            if np.any((node.v_threshold / gain <= 0) & (beta != 0)):
                snn.append(f"{where}: threshold <= 0 with a leak: snnTorch's reset bookkeeping then doubles the "
                           "membrane after a spike")
        if k == "IF":
            if not np.allclose(np.asarray(node.r) * dt, 1, rtol=1e-12, atol=0):
                nor.append(f"{where}: r*dt != 1 (Norse's IF adds its input unscaled)")
            if not np.allclose(node.v_reset, 0):
                nor.append(f"{where}: v_reset != 0 (Norse resets to 0)")
        if k == "CubaLIF":
            _cuba_limits(where, node, dt, snn, nor)
    _subtract_reset_limits(graph, snn, nor)
    for name, node in graph.nodes.items():
        if isinstance(node, nir.NIRGraph):
            for lst in (snn, nor):
                lst.append(f"node {name!r}: a nested graph (recurrence) is not checked here")
    _cycle_limits(graph, snn, nor)
    for name in ("norse", "sinabs"):
        out[name] += executor_limits(graph)
    return out


EXECUTOR = ("nirtorch 2.6's GraphExecutor (nirtorch.load) runs the nodes in depth-first preorder from the Input, "
            "edges in file order, not in a topological order")


def executor_limits(graph: nir.NIRGraph) -> list[str]:
    """What ``nirtorch.load`` (Norse, Sinabs, Rockpool) does to a graph whose depth-first preorder is not a
    topological order: a node reads each input not yet computed in this step from the previous step (a join of two
    paths), and the graph returns the output of the last node visited, the Output's only when it is last."""
    from spikec.formats.nir.interpreter import inline, schedule
    if any(isinstance(n, nir.NIRGraph) for n in graph.nodes.values()):
        return []
    _, back = schedule(*inline(graph))
    start = [n for n, v in graph.nodes.items() if isinstance(v, nir.Input)][:1]
    order, seen = [], set()

    def visit(n):
        seen.add(n)
        order.append(n)
        for s, d in graph.edges:
            if s == n and d not in seen:
                visit(d)
    for n in start:
        visit(n)
    pos = {n: i for i, n in enumerate(order)}
    out = [f"node {d!r} is run before its input {s!r} (a join of two paths): {EXECUTOR}, so it reads {s!r} of the "
           "previous step" for s, d in graph.edges
           if (s, d) not in back and s in pos and d in pos and pos[s] > pos[d]]
    last = [n for n in order if isinstance(graph.nodes[n], nir.Output)]
    if last and order[-1] != last[0]:
        out.append(f"the Output is not the last node visited ({order[-1]!r} is): {EXECUTOR}, and it returns the "
                   "last node's output")
    return out


NESTED = ("import_from_nir wraps it in a nested NIRGraph (its RLeaky/RSynaptic pattern), which nirtorch 2.6's "
          "nir_to_torch cannot build (AttributeError: 'GraphModule' object has no attribute 'items') or, fed by the "
          "Input directly, builds without the loop's effect (other spikes)")


def _cycle_limits(graph, snn, nor):
    """Cycles. Both importers build the graph with nirtorch 2.6, which reads a cycle's edge one step late and as 0
    at the first step (the file's meaning there is the source's output at rest: a bias); snnTorch first turns a
    neuron's two-node dense recurrence into a nested graph that nirtorch then fails on."""
    for name, node in graph.nodes.items():
        k = _kind(node)
        bias = getattr(node, "bias", None) if k in ("Affine", "Conv1d", "Conv2d") else None
        if bias is not None and np.any(np.asarray(bias) != 0) and \
                any(s == name and _reaches(graph, d, name) for s, d in graph.edges):
            for lst, who in ((snn, "snnTorch's import_from_nir"), (nor, "Norse's from_nir")):
                lst.append(f"node {name!r}: a recurrence with a bias (a cycle through a biased node): {who} "
                           "(nirtorch) reads a cycle's edge as 0 at the first step, the file's feedback carries its "
                           "bias from the first step")
    for s, d in graph.edges:
        if _dense_recurrence(graph, s, d) and (d, s) in graph.edges:
            snn.append(f"the recurrence {s!r} <-> {d!r}: " + NESTED)


def _sj_limits(graph: nir.NIRGraph, dt: float) -> list[str]:
    """What SpikingJelly 2.0.0's ``import_from_nir(graph, dt=dt)`` checks (it raises ValueError otherwise) and does."""
    out, close = [], lambda a, b: bool(np.allclose(np.asarray(a, dtype=np.float64), b, rtol=1e-9, atol=0))
    for name, node in graph.nodes.items():
        k, where = _kind(node), f"node {name!r} ({_kind(node)})"
        if k not in SJ_NODES:
            out.append(f"{where}: import_from_nir has no mapping for it (nirtorch raises)")
            continue
        params = [getattr(node, p) for p in ("tau", "tau_syn", "tau_mem", "r", "w_in", "v_threshold", "v_reset",
                                              "v_leak") if hasattr(node, p)]
        if k in ("IF", "LIF", "CubaLIF") and not all(_uniform(p) for p in params):
            out.append(f"{where}: a parameter varies across neurons (SpikingJelly takes one value, raises)")
            continue
        if k == "IF" and not close(node.r, 1 / dt):
            out.append(f"{where}: r != 1/dt (SpikingJelly raises)")
        if k == "LIF" and not np.all(np.asarray(node.tau) / dt > 1):
            out.append(f"{where}: tau <= dt (SpikingJelly raises: tau / dt must be greater than 1)")
        elif k == "LIF" and not is_clock(graph, name, dt):
            out.append(f"{where}: SpikingJelly's LIFNode charges V + (X - (V - v_reset))/tau: another rounding")
        if k == "CubaLIF":
            if not close(node.r, np.asarray(node.tau_mem) / dt) or not close(node.w_in, np.asarray(node.tau_syn) / dt):
                out.append(f"{where}: r != tau_mem/dt or w_in != tau_syn/dt (SpikingJelly raises): export with the "
                           "option nir_consumer='snntorch'")
            if not np.allclose(node.v_leak, 0):
                out.append(f"{where}: v_leak != 0 (SpikingJelly raises)")
    return out


def is_clock(graph: nir.NIRGraph, name: str, dt: float) -> bool:
    """A LIF that fires on every step (``reach._clock``): fed only by an all-zero Affine whose bias, charged from 0,
    is twice its threshold or more, resetting to 0. Its state is 0 at every step's start, so every reader's charge
    from 0 gives the same spike."""
    node, feeds = graph.nodes[name], [s for s, d in graph.edges if d == name]
    if _kind(node) != "LIF" or len(feeds) != 1 or _kind(graph.nodes[feeds[0]]) != "Affine":
        return False
    a, gain = graph.nodes[feeds[0]], np.asarray(node.r) * dt / np.asarray(node.tau)
    return bool(not np.any(a.weight) and not np.any(node.v_leak) and not np.any(node.v_reset)
                and np.all(gain * a.bias >= 2 * np.asarray(node.v_threshold)) and np.all(node.v_threshold > 0))


def one_output_parts(graph: nir.NIRGraph) -> dict[str, nir.NIRGraph]:
    """Per Output node, the graph of that Output, the Inputs and every node it reads (cycles included): what a
    one-output importer (nirtorch) can run of a file with several outputs. Same nodes, edges among them."""
    parts = {}
    for out in [n for n, v in graph.nodes.items() if isinstance(v, nir.Output)]:
        keep, todo = {out}, [out]
        while todo:
            d = todo.pop()
            for s, dd in graph.edges:
                if dd == d and s not in keep:
                    keep.add(s)
                    todo.append(s)
        keep |= {n for n, v in graph.nodes.items() if isinstance(v, nir.Input)}
        parts[out] = nir.NIRGraph(nodes={n: v for n, v in graph.nodes.items() if n in keep},
                                  edges=[(s, d) for s, d in graph.edges if s in keep and d in keep],
                                  metadata=dict(graph.metadata or {}), type_check=False)
    return parts


def _sinabs_scheme_limits(graph: nir.NIRGraph) -> dict[str, list[str]]:
    """A file written for Sinabs (``schemes_sinabs``): Sinabs's reading is the file's meaning; every other consumer
    reads NIR's neurons, and a file without neurons means the same in all."""
    neurons = [n for n, v in graph.nodes.items() if _kind(v) in ("LIF", "IF", "LI", "CubaLIF", "CubaLI", "I")]
    out = {name: ([SINABS_SCHEME.format(who=name)] if neurons else []) for name in CONSUMERS if name != "sinabs"}
    sinabs = out["sinabs"] = []
    for name, node in graph.nodes.items():
        k, where = _kind(node), f"node {name!r} ({_kind(node)})"
        if k not in SINABS_NODES:
            sinabs.append(f"{where}: sinabs.from_nir has no mapping for it (nirtorch raises)")
        elif k in ("LI", "LIF", "IF") and not np.all(np.asarray(node.r) == 1):
            sinabs.append(f"{where}: r != 1 (Sinabs ignores r)")
        elif k in ("LI", "LIF") and not np.allclose(node.v_leak, 0):
            sinabs.append(f"{where}: v_leak != 0 (Sinabs raises)")
        elif k == "LIF" and np.ndim(node.v_leak) > 1 and np.shape(node.v_leak)[1:] != (1,) * (np.ndim(node.v_leak) - 1):
            sinabs.append(f"{where}: a LIF on a {tuple(np.shape(node.v_leak))} map: sinabs.from_nir tests "
                          "any(node.v_leak) != 0, which raises on it (ValueError: truth value ambiguous); NIR IF "
                          "(an IAF with min_v_mem = -spike_threshold) it reads")
    sinabs += executor_limits(graph)
    return out


def _sinabs_limits(graph: nir.NIRGraph) -> list[str]:
    """What Sinabs 3.1.3's ``from_nir`` (``sinabs/nir.py``) does with each node."""
    out = []
    for name, node in graph.nodes.items():
        k, where = _kind(node), f"node {name!r} ({_kind(node)})"
        if k not in SINABS_NODES:
            out.append(f"{where}: sinabs.from_nir has no mapping for it (nirtorch raises)")
        if k in ("LI", "LIF") and not np.allclose(node.v_leak, 0):
            out.append(f"{where}: v_leak != 0 (Sinabs raises)")
        if k == "LI" and not np.all(np.asarray(node.r) == 1):
            out.append(f"{where}: r != 1 (Sinabs raises)")
        if k in ("LI", "LIF"):
            out.append(f"{where}: {SINABS_TAU}")
        if k == "IF":
            out.append(f"{where}: " + SINABS_NEURON.format(cls="IAF", kind="IF", clip=", and clips v at "
                                                           "-v_threshold (min_v_mem)"))
        if k == "LIF":
            out.append(f"{where}: " + SINABS_NEURON.format(cls="LIF", kind="LIF", clip=""))
    return out


def _dense_recurrence(graph, neuron: str, dense: str) -> bool:
    """``neuron`` <-> ``dense`` is a neuron's dense recurrence: the cycle snnTorch's importer turns into an RLeaky /
    RSynaptic, and Norse's runs."""
    n, w = graph.nodes.get(neuron), graph.nodes.get(dense)
    return (_kind(n) in ("LIF", "CubaLIF") and _kind(w) in ("Affine", "Linear")
            and [d for s, d in graph.edges if s == dense] == [neuron]
            and [s for s, d in graph.edges if d == dense] == [neuron])


def _snntorch_if(node) -> str:
    why = "snnTorch imports IF as a Leaky with beta = 0.9 and a subtract reset, not an integrator"
    if not np.all(np.asarray(node.r) == 1):
        why += ("; and it asserts r = 1, so the import raises (the option nir_consumer='snntorch' writes r = 1: "
                "the file then imports, as that Leaky)")
    return why


def _cuba_limits(where, node, dt, snn, nor):
    """What each importer does with a CubaLIF (read from snntorch/import_nir.py, norse/torch/utils/import_nir.py)."""
    if not np.allclose(node.v_leak, 0):
        snn.append(f"{where}: v_leak != 0 (snnTorch asserts v_leak = 0)")
        nor.append(f"{where}: v_leak != 0 (Norse applies v_leak to the synapse too and starts both states at it)")
    if not np.allclose(node.v_reset, 0):
        snn.append(f"{where}: v_reset != 0 (snnTorch's Synaptic resets to 0)")
        nor.append(f"{where}: v_reset != 0 (Norse resets to 0)")
    if not np.allclose(node.r, node.tau_mem / 1e-4):
        snn.append(f"{where}: r != tau_mem/dt (snnTorch asserts r = tau_mem/1e-4): export with the option "
                   "nir_consumer='snntorch'")
    w_scale = node.w_in * (1e-4 / node.tau_syn)
    vthr = node.v_threshold if np.allclose(w_scale, 1.0) else node.v_threshold / w_scale
    if not _uniform(vthr):
        snn.append(f"{where}: v_threshold/(w_in dt/tau_syn) varies across neurons (snnTorch asserts one value)")


def _subtract_reset_limits(graph, snn, nor):
    """A subtract reset is written as LI/I -> Threshold -> feedback -> LI/I: name it as what it is."""
    for name, node in graph.nodes.items():
        if _kind(node) == "Threshold" and any(s == name and _reaches(graph, d, name) for s, d in graph.edges):
            snn.append(f"node {name!r}: a subtract-reset neuron (LI/I + Threshold + a reset feedback cycle): "
                       "snnTorch's import_from_nir has no subtract-reset neuron (its LIF and CubaLIF reset to zero) "
                       "and no mapping for LI, I or Threshold")
            nor.append(f"node {name!r}: a subtract-reset neuron (LI/I + Threshold + a reset feedback cycle): Norse's "
                       "from_nir resets LIF to a value (reset_value) and drops LI, I and Threshold nodes")


def _reaches(graph, start, goal) -> bool:
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        if n == goal:
            return True
        if n in seen:
            continue
        seen.add(n)
        todo += [d for s, d in graph.edges if s == n]
    return False


@contextlib.contextmanager
def _quiet():
    """snnTorch prints a warning per scaled LIF; nirtorch and Norse warn and log: keep the console clean."""
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.getLogger().setLevel(level)


def _import(consumer: str, source, dt: float):
    """The consumer's module for ``source``: a file's path, or a graph read from one, which the import may change
    (nirtorch replaces subgraphs in place: give it a copy)."""
    graph = source if isinstance(source, nir.NIRGraph) else hdf5.read(source)
    if consumer == "snntorch":
        from snntorch.import_nir import import_from_nir
        return import_from_nir(graph)
    if consumer == "sinabs":
        return _sinabs_module(graph)
    if consumer == "spikingjelly":
        from spikingjelly.activation_based.nir_exchange.from_nir import import_from_nir as sj_import
        return sj_import(graph, dt=dt)
    from norse.torch import from_nir
    return from_nir(graph, dt=dt)


def _reset(module):
    for m in module.modules():  # snnTorch's init_hidden neurons keep their state on the module
        if hasattr(m, "reset_mem") and hasattr(m, "init_hidden"):
            m.reset_mem()


def _flattens(graph: nir.NIRGraph) -> bool:
    """A Flatten anywhere: snnTorch and Norse hand its NIR (batch-free) dims to torch's Flatten, which counts the batch,
    so such a file runs one sample at a time; any other runs on the whole batch at once."""
    return any(isinstance(n, nir.Flatten) or (isinstance(n, nir.NIRGraph) and _flattens(n)) for n in graph.nodes.values())


def _hook_names(graph: nir.NIRGraph) -> dict[str, str]:
    """Sanitized module name -> NIR name, for the spiking nodes (nirtorch replaces '.' by '_')."""
    return {n.replace(".", "_"): n for n, v in graph.nodes.items() if _kind(v) in ("LIF", "IF", "CubaLIF")}


def _out(o, one: bool):
    """A hooked module's output; ``one``: Sinabs's carries its batch of one (``batch_size=1``), dropped."""
    o = o[0] if isinstance(o, tuple) else o
    return o[0] if one else o


def run_consumer(consumer: str, path, inputs: np.ndarray, dt: float, out_shape,
                 read: nir.NIRGraph | None = None) -> tuple[np.ndarray, dict]:
    """Import ``path`` with ``consumer`` and run it on ``inputs [T, B, ...]``; ``read``: the file's ``hdf5.read``
    already made (each consumer imports a copy of it: a file is read once for all of them).

    Returns the graph output ``[T, B, *out_shape]`` and the spikes of every hooked neuron ``[T, B, ...]``.
    """
    outs, spikes, _ = run_consumer_outputs(consumer, path, inputs, dt, out_shape, read)
    return outs, spikes


def run_consumer_outputs(consumer: str, path, inputs: np.ndarray, dt: float, out_shape,
                         read: nir.NIRGraph | None = None, extra: dict | None = None):
    """``run_consumer``, and ``extra`` (``{name: (NIR node, shape)}``, snnTorch and Norse: their modules are the
    nodes) read off the same run: each node's output ``[T, B, *shape]`` through a hook on its module (what an Output
    reading the node would return). Returns ``(output, spikes, {name: output})``."""
    from spikec.formats.nir.interpreter import one_thread
    graph = hdf5.read(path) if read is None else copy.deepcopy(read)
    wanted, flattens = _hook_names(graph), _flattens(graph)
    if consumer == "rockpool":   # Rockpool's modules evolve the whole sequence: one call on [B, T, N]
        with _quiet(), one_thread():
            return (*rockpool_consumer.run(graph, inputs, out_shape), {})
    extra = extra or {}
    with _quiet(), one_thread():
        module = _import(consumer, graph, dt)
        seen: dict = {}   # neuron name -> its spikes per step; ("output", name) -> an extra output per step
        by_module = {src.replace(".", "_"): ("output", name) for name, (src, _) in extra.items()}
        hooks, one = [], consumer == "sinabs"
        for name, m in module.named_modules():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in wanted and name.count(".") == one:   # Sinabs's is wrapped (Stepped)
                hooks.append(m.register_forward_hook(lambda mod, i, o, n=wanted[leaf], one=one: seen.setdefault(
                    n, []).append(_out(o, one).detach().double().clone())))
            if name in by_module:
                hooks.append(m.register_forward_hook(lambda mod, i, o, n=by_module[name]: seen.setdefault(
                    n, []).append(_out(o, False).detach().double().clone())))
        T, B = inputs.shape[:2]
        outs = np.zeros((T, B, *out_shape))
        spikes: dict[str, list] = {}
        batched = consumer in BATCHED or (consumer in ("snntorch", "norse") and not flattens)
        try:
            with torch.no_grad():
                for b in ([slice(None)] if batched else range(B)):
                    _reset(module)
                    state = None
                    for k in seen:
                        seen[k] = []
                    for t in range(T):
                        x = torch.as_tensor(inputs[t, b], dtype=torch.float32)
                        y, state = module(x, state)  # both return (output, state)
                        if y.numel() != int(np.prod(out_shape)) * (B if batched else 1):
                            raise ValueError(f"its module returned a {tuple(y.shape)} tensor, not the graph "
                                             f"output's {tuple(out_shape)}")
                        outs[t, b] = y.detach().double().numpy().reshape((B, *out_shape) if batched else out_shape)
                    for k, v in seen.items():
                        if isinstance(k, tuple) and len(v) != T:
                            raise ValueError(f"node {k[1]!r}'s module ran {len(v)} times in {T} steps")
                        spikes.setdefault(k, []).append(torch.stack(v).numpy())
        finally:
            for h in hooks:
                h.remove()
    got = {k: v[0] if batched else np.stack(v, axis=1) for k, v in spikes.items()}
    missing = [name for name in extra if ("output", name) not in got]
    if missing:
        raise ValueError(f"no module of the import computes {', '.join(extra[n][0] for n in missing)}")
    return (outs, {k: v for k, v in got.items() if not isinstance(k, tuple)},
            {name: got[("output", name)].reshape((T, B, *shape)) for name, (_, shape) in extra.items()})


def _sinabs_module(graph):
    """``sinabs.from_nir`` (one sample: batch_size=1), stepped one call per step: its Squeeze layers keep their
    state between calls, and the wrapper returns ``(output, None)`` as the other importers do."""
    from spikec.frontend import sinabs as sinabs_frontend
    sinabs_frontend._stub_pylab()  # Sinabs imports pylab (matplotlib) at package import only to plot
    from sinabs import from_nir

    class Stepped(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, state=None):
            y = self.net(x.unsqueeze(0))
            return (y[0] if isinstance(y, tuple) else y)[0], None

        def reset_mem(self):
            for m in self.net.modules():
                if hasattr(m, "reset_states"):
                    m.reset_states()
        init_hidden = True
    return Stepped(from_nir(graph, batch_size=1))


def available(consumer: str) -> str | None:
    """None when the consumer imports; else why not."""
    if consumer == "rockpool":
        with _quiet():
            return rockpool_consumer.available()
    try:
        with _quiet():
            if consumer == "snntorch":
                import snntorch.import_nir  # noqa: F401
            elif consumer == "spikingjelly":
                import spikingjelly.activation_based.nir_exchange.from_nir  # noqa: F401
            elif consumer == "sinabs":
                from spikec.frontend import sinabs as sinabs_frontend
                sinabs_frontend._stub_pylab()
                import sinabs.nir  # noqa: F401
            else:
                import norse.torch  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return f"{consumer} cannot be imported: {type(e).__name__}: {e}"
    return None
