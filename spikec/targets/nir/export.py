"""IR -> NIR (nir 1.0.8): an exact export, or a refusal naming the node.

NIR is continuous time. The file records a time step ``dt`` and a discretization scheme and is written so
that forward Euler at that ``dt`` reproduces the source's discrete dynamics (semantics.md 1.1). Which ``dt``,
scheme and per-neuron parameterisation (``forms``): a graph read from NIR is written at the ``dt`` and scheme it
was read at, any other at ``dt = 1e-4`` (snnTorch's importer hard-codes it) in snnTorch's scheme; the
``consumer`` (``any`` | ``snntorch`` | ``norse``) picks the form that importer honours. The schemes (targets.md,
"NIR"): snnTorch's ``beta = 1 - dt/tau``, ``v <- beta v + I``, fire ``v > v_th/(r dt/tau)``, and Norse's
literal Euler ``v <- v + dt/tau (v_leak - v + r I)``. The mappings below are the snnTorch scheme's.

Neuron mappings (``U = beta H + alpha X + bias``, ``S = [U >= theta]``; per-neuron arrays of the
per-step shape, channel values broadcast):

* hard reset, ``0 <= beta < 1`` -> ``LIF`` with ``tau = dt/(1 - beta)``, ``r = alpha``, ``v_leak = bias``,
  ``v_threshold ~ (1 - beta) theta``, ``v_reset = (1 - beta) v_reset``. The NIR state is ``(1 - beta) U``
  (snnTorch's scaled state is ``U / alpha``). ``r = 1, v_leak = 0`` whenever ``alpha = 1, bias = 0``: then
  both importers agree. ``tau`` and ``v_threshold`` are searched ulp by ulp so that the importer's own
  float64 arithmetic gives back ``1 - dt/tau == beta`` and ``v_threshold/(r dt/tau) == nextafter(theta, -inf)``
  exactly: ``U > nextafter(theta, -inf)`` is ``U >= theta`` for every float.
* hard reset, ``beta = 1`` (IF) -> ``IF`` with ``dt*r = 1`` (``r = 1`` for the snnTorch consumer), the state
  ``U/alpha``, ``v_threshold/(r dt) = nextafter(theta/alpha, -inf)``; bias must be 0 (IF has no leak term).
* a never-firing hard-reset neuron read as its membrane -> ``LI`` (``I`` for ``beta = 1``); when its only reader
  is a leaky hard-reset ``lif``, it is that neuron's current: the pair -> ``CubaLIF`` (``CubaLI``).
* subtract reset, ``0 < beta < 1`` -> ``LI`` (``tau = dt/(1 - beta)``, ``r = alpha/(1 - beta)``,
  ``v_leak = bias/(1 - beta)``: the LI state is ``U`` itself) + ``Threshold(nextafter(theta, -inf))`` + a
  feedback ``-beta theta / alpha`` per neuron (diagonal ``Affine`` or depthwise 1x1 ``Conv2d``) from the
  Threshold back into the LI: a feedback edge is read one step late, so the LI sees
  ``X_t - (beta theta/alpha) S_{t-1}``. ``beta = 1`` uses ``I`` (``r = alpha/dt``) instead of ``LI``.
  ``beta = 0`` has no memory: its reset is irrelevant and it is exported as a hard-reset ``LIF``.
* a membrane read-out (``output="membrane"``) of a subtract-reset neuron is the LI/I node's output.
* the frameworks' default neurons (``lif_snntorch``, soft ``lif_sj``, ``lif_norse``): ``composed``; reshape: ``structure``.

Other ops: conv2d -> ``Conv2d``; linear -> ``Affine`` (zero bias when absent); avgpool2d -> ``AvgPool2d``;
flatten -> ``Flatten`` in NIR's batch-free dims; delay -> ``Delay(steps*dt)``; add -> no node (NIR sums the
edges into a node); scale / leftover batchnorm -> depthwise 1x1 ``Conv2d`` (or diagonal ``Affine``):
``a x + b`` with one multiply and one add, as the source; windowsum -> depthwise all-ones ``Conv2d``;
tdm -> depthwise convs of ``x`` and ``Delay(x)``; maxpool2d over *binary* spikes -> depthwise all-ones
``Conv2d`` + ``LIF`` (``beta = 0``, fires on a window sum ``> 0.5``: the OR).

Refused (``UnsupportedOp`` naming the node): integer spikes, sub-step graphs, per-step BNTT and bias
schedules, dynamic products, hard-reset membrane read-outs, relu, dense host ops, the frameworks' exact
neurons (``lif_snntorch`` ... ``li_norse``: why in ``REASONS``, and in ``REMEDIES`` what compiles instead: ONNX,
or the framework module settings spikec converts to its own ``lif``), and every other op.
"""
from dataclasses import dataclass, field

import nir
import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node
from spikec.ops.common import bn_scale_shift
from spikec.targets.nir import composed, forms, structure
from spikec.ops import OPS
from spikec.targets.nir.reasons import LIF, LIF_NORSE, LIF_SINABS, LIF_SJ, LIF_SNNTORCH, REASONS, REMEDIES, REMEDY, \
    SUBSTEP_SUM, SYNAPTIC_SNNTORCH, VARIANT_REASONS  # noqa: F401 (re-exported)
from spikec.targets.nir.forms import SINABS
from spikec.targets.nir.forms import CONSUMER, DT, SCHEME, Form, form_for, tau_for, threshold_for  # noqa: F401

NEVER = float(np.finfo(np.float64).max)  # the threshold of a neuron read out as its membrane only (frontend)
FORMAT = "spikec-nir"
VERSION = 1
FIRING = "strict: spike when v > v_threshold; the source's U >= theta is written as nextafter(theta, -inf)"
DISCRETIZATION = ("forward Euler at dt; scheme 'snntorch': beta = 1 - dt/tau, v <- beta*v + I + v_leak/r, "
                  "spike v > v_threshold/(r*dt/tau), reset to v_reset/(r*dt/tau); scheme 'norse': "
                  "v <- v + dt*(1/tau)*(r*I + v_leak - v), spike v > v_threshold, reset to v_reset; "
                  "state starts at 0; an edge that closes a cycle is read one step late")

SINABS_DISCRETIZATION = ("consumer scheme 'sinabs' (sinabs.from_nir's reading, not NIR's ODE): tau in steps of "
                         "dt = 1; LIF: v <- exp(-dt/tau) v + I, s = [v > 0] trunc(v / v_threshold) spikes (a count), "
                         "v <- v - s v_threshold (a float32 product); IF: v <- v + I, the same, then v <- max(v, "
                         "-v_threshold); LI: v <- exp(-dt/tau) v + I; r = 1, v_leak = 0; state starts at 0")
SINABS_LABEL = ("written for Sinabs: its LIF/IF are Sinabs's MultiSpike subtract-reset neurons (sinabs.from_nir's "
                "LIFSqueeze / IAFSqueeze), which emit spike counts; read as NIR's own LIF/IF (one spike, reset to "
                "v_reset) by snnTorch, Norse, SpikingJelly or Rockpool they compute something else")

# the lowering table: op -> fn(exporter, node) writing the node's NIR form (``@lowering(op)``); an op with no
# entry is refused with its reason in ``REASONS`` (or as having no NIR mapping)
LOWERINGS: dict = {}


def lowering(op: str):
    def register(fn):
        LOWERINGS[op] = fn
        return fn
    return register


@dataclass
class Exported:
    """The NIR graph, and where each IR node's value lives in it (the NIR nodes whose outputs sum to it)."""
    graph: nir.NIRGraph
    sources: dict[str, list[str]]
    carriers: dict[str, str]            # IR node -> the single NIR node computing exactly its value
    outputs: dict[str, str]             # NIR Output node -> IR output node
    notes: list[str] = field(default_factory=list)
    bit_exact_params: bool = True       # importer arithmetic gives back beta and theta to the last bit
    form: Form | None = None            # dt, scheme and consumer the file is written for
    over_time: dict = field(default_factory=dict)   # NIR Output -> the read-out over time its reader applies


def _refuse(node: Node, why: str, remedy: str = REMEDY):
    raise UnsupportedOp(f"cannot be exported to NIR exactly: {why}",
                        where=f"node {node.name!r} ({node.op}{', module ' + repr(node.scope) if node.scope else ''})",
                        remedy=remedy)


class _Exporter:
    def __init__(self, graph: Graph, form: Form):
        self.graph, self.form, self.dt = graph, form, form.dt
        self.users: dict[str, list[str]] = {}
        for n in graph.nodes:
            for i in n.inputs:
                self.users.setdefault(i, []).append(n.name)
        self.synapses: dict[str, dict] = {}  # never-firing membrane read by one neuron only: a CubaLIF's current
        self.nodes: dict[str, nir.NIRNode] = {}
        self.edges: list[tuple[str, str]] = []
        self.sources: dict[str, list[str]] = {}
        self.carriers: dict[str, str] = {}
        self.names: set[str] = set()
        self.notes: list[str] = []
        self.exact_params = True
        self.neurons: dict[tuple, dict] = {}  # dynamics key -> {"spikes": nir name, "membrane": nir name}

    # -- names and wiring -----------------------------------------------------------------
    def name(self, base: str) -> str:
        """A deterministic NIR name: '.' -> '_' (nirtorch turns '.' into '_'), no leading digit, unique."""
        base = base.replace(".", "_") or "node"
        if base[0].isdigit():
            base = "n" + base
        name, k = base, 2
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def add(self, base: str, node: nir.NIRNode, inputs=()) -> str:
        name = self.name(base)
        self.nodes[name] = node
        for src in inputs:
            self.connect(src, name)
        return name

    def connect(self, src_ir: str, dst: str):
        """Edges from every NIR source of IR value ``src_ir`` into NIR node ``dst``."""
        for s in self.sources[src_ir]:
            self.edges.append((s, dst))

    def single(self, node: Node, name: str):
        self.sources[node.name] = [name]
        self.carriers[node.name] = name

    # -- helpers ----------------------------------------------------------------------------
    def per_neuron(self, node: Node, value) -> np.ndarray:
        """A scalar or per-channel parameter as a float64 array of the per-step shape."""
        shape = node.type.shape
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 1:
            v = v.reshape((-1,) + (1,) * (len(shape) - 1))
        return np.ascontiguousarray(np.broadcast_to(v, shape), dtype=np.float64)

    def conv(self, node: Node, base: str, inputs, in_shape, weight, bias, stride, padding, dilation, groups) -> str:
        """A NIR Conv2d. nir 1.0.8 types a grouped conv by ``weight.shape[1]`` (C_in/groups) and a non-square
        kernel by its height, so ``nir.read`` would reject both: a grouped kernel is written as the equivalent
        dense one (zeros off the groups) and a non-square kernel is padded with zeros to a square (the
        padding grows by as much), which adds exact zeros to each sum and keeps every window in place."""
        weight = np.asarray(weight, dtype=np.float64)
        c_out, c_in_g, kh, kw = weight.shape
        stride, padding, dilation = (tuple(int(v) for v in np.broadcast_to(np.asarray(a), (2,)))
                                     for a in (stride, padding, dilation))
        if groups != 1:
            c_in, per_out = c_in_g * groups, c_out // groups
            dense = np.zeros((c_out, c_in, kh, kw))
            for g in range(groups):
                dense[g * per_out:(g + 1) * per_out, g * c_in_g:(g + 1) * c_in_g] = weight[g * per_out:(g + 1) * per_out]
            weight = dense
        if kh != kw:
            if (kh - kw) % 2:
                _refuse(node, f"a {kh}x{kw} kernel: nir 1.0.8 types a conv by its kernel height, and an odd "
                        "difference cannot be padded to a square symmetrically")
            grow_h, grow_w = (max(kh, kw) - kh) // 2, (max(kh, kw) - kw) // 2
            weight = np.pad(weight, ((0, 0), (0, 0), (grow_h, grow_h), (grow_w, grow_w)))
            padding = (padding[0] + grow_h * dilation[0], padding[1] + grow_w * dilation[1])
        conv = nir.Conv2d(input_shape=tuple(in_shape[1:]), weight=weight, stride=stride, padding=padding,
                          dilation=dilation, groups=1, bias=np.asarray(bias, dtype=np.float64))
        return self.add(base, conv, inputs)

    def channel_affine(self, node: Node, base: str, inputs, a, b, shape) -> str:
        """``a*x + b`` per channel (a, b scalars or (C,)) as a depthwise 1x1 Conv2d or a diagonal Affine."""
        c = shape[0]
        a = np.broadcast_to(np.asarray(a, dtype=np.float64), (c,)).copy()
        b = np.broadcast_to(np.asarray(b, dtype=np.float64), (c,)).copy()
        if len(shape) == 3:
            return self.conv(node, base, inputs, shape, np.diag(a).reshape(c, c, 1, 1), b, 1, 0, 1, 1)
        if len(shape) in (1, 2):   # (N,): a diagonal Affine; (C, L): a depthwise kernel-1 Conv1d
            return self.add(base, nir.Affine(weight=np.diag(a), bias=b) if len(shape) == 1 else
                            structure.channel_conv1d(a, b, shape), inputs)
        _refuse(node, f"a per-channel affine on a rank-{len(shape)} tensor {shape} has no NIR node")

    # -- the graph -------------------------------------------------------------------------------
    def run(self) -> Exported:
        g = self.graph
        out_names = ["output" if i == 0 else f"output_{i}" for i in range(len(g.outputs))]
        self.names.update(out_names)  # reserved: an IR node named "output" becomes "output_2"
        for node in g.nodes:
            if node.type.substeps != 1:
                _refuse(node, REASONS[SUBSTEP_SUM])
            if self.form.scheme == SINABS and node.op != LIF_SINABS and (node.op == "maxpool2d" or (
                    node.op in OPS and OPS[node.op].neuron)):
                _refuse(node, "the file is written in the consumer scheme 'sinabs' (for the graph's lif_sinabs "
                        "neurons), where every NIR LIF/IF is a Sinabs MultiSpike neuron: this node has no form there",
                        "use Sinabs layers throughout (or SingleSpike ones, which spikec converts to its own lif)")
            if node.op not in LOWERINGS:
                _refuse(node, REASONS.get(node.op, f"op {node.op!r} has no NIR mapping"),
                        REMEDIES.get(node.op, REMEDY))
            LOWERINGS[node.op](self, node)
        outputs, over_time = {}, {}
        readouts = getattr(self, "readouts", {})   # read-outs over time (readout.py): the output is their input
        for name, o in zip(out_names, g.outputs):
            self.nodes[name] = nir.Output(output_type=np.array(g.node(o).type.shape))
            self.connect(o, name)
            outputs[name] = readouts[o]["of"] if o in readouts else o
            if o in readouts:
                over_time[name] = {"read_out": o, **readouts[o]}
        dupes = {e for e in self.edges if self.edges.count(e) > 1}
        if dupes:  # x + x: NIR forbids duplicate edges (handled by the add lowering; a safety net)
            raise UnsupportedOp(f"duplicate NIR edges {sorted(dupes)}", where="NIR export")
        graph = nir.NIRGraph(nodes=self.nodes, edges=self.edges, metadata={}, type_check=True)
        return Exported(graph, self.sources, self.carriers, outputs, self.notes, self.exact_params, self.form,
                        over_time)

    # -- neurons -----------------------------------------------------------------------------
    def hard_reset(self, node, beta, alpha, bias, theta, v_reset) -> str:
        if (alpha <= 0).any():  # NIR's comparison is v >= v_threshold on r-scaled input: r <= 0 cannot flip it
            _refuse(node, "the neuron's input gain alpha is <= 0 on some channel (a BatchNorm with a negative "
                          "gamma folded into a hard-reset neuron gives alpha < 0); NIR's LIF/IF scales the input "
                          "by r and fires on v >= v_threshold, which cannot express the flipped comparison",
                    "compile for NIR with --passes none (the BatchNorm then stays a separate affine), or "
                    "train with a positive BatchNorm gamma before this neuron")
        if (beta == 1).all():
            if (bias != 0).any():
                _refuse(node, "a non-leaky (beta = 1) neuron with a bias: NIR IF has no constant input term")
            lif, ok, how = forms.if_node(self.form, alpha, theta, v_reset)
            self.exact_params &= ok
            self.notes.append(f"{node.name}: hard-reset IF (beta = 1) as NIR IF with {how}")
            return self.add(node.name, lif, node.inputs)
        if (beta == 1).any():
            _refuse(node, "beta = 1 on some channels and < 1 on others: neither NIR LIF nor IF covers both")
        lif, ok = forms.lif(self.form, beta, alpha, bias, theta, v_reset)
        self.exact_params &= ok
        return self.add(node.name, lif, node.inputs)

    def subtract_reset(self, node, beta, alpha, bias, theta) -> tuple[str, str]:
        shape = node.type.shape
        if (beta == 1).all():
            if (bias != 0).any():
                _refuse(node, "a non-leaky (beta = 1) subtract-reset neuron with a bias: NIR I has no constant "
                        "input term")
            state = nir.I(r=alpha / self.dt)
            fb = -theta / alpha
        elif (beta == 1).any():
            _refuse(node, "beta = 1 on some channels and < 1 on others: neither NIR LI nor I covers both")
        else:
            tau, ok = tau_for(beta, self.dt)
            self.exact_params &= ok
            state = nir.LI(tau=tau, r=alpha / (1.0 - beta), v_leak=bias / (1.0 - beta))
            fb = -beta * theta / alpha
        li = self.add(f"{node.name}.li", state, node.inputs)
        spikes = self.add(node.name, nir.Threshold(threshold=np.nextafter(theta, -np.inf)))
        self.edges.append((li, spikes))
        per_channel = fb.reshape(shape[0], -1)
        if not (per_channel == per_channel[:, :1]).all():
            _refuse(node, "the reset feedback varies within a channel")
        self.sources[f"{node.name}.fb_src"] = [spikes]
        feedback = self.channel_affine(node, f"{node.name}.reset", (f"{node.name}.fb_src",), per_channel[:, 0], 0.0,
                                       shape)
        del self.sources[f"{node.name}.fb_src"]
        self.edges.append((feedback, li))
        self.notes.append(f"{node.name}: subtract reset as LI + Threshold + a feedback of -beta*theta/alpha "
                          "(read one step late)")
        return li, spikes


# -- lowerings, one per op ----------------------------------------------------------------------------
@lowering("input")
def _input(ex: _Exporter, node: Node):
    ex.single(node, ex.add(node.name, nir.Input(input_type=np.array(node.type.shape))))


@lowering("conv2d")
def _conv2d(ex: _Exporter, node: Node):
    if structure.is_conv1d(ex, node):
        return structure.conv1d(ex, node)
    x = ex.graph.node(node.inputs[0]).type
    w = np.asarray(node.params["weight"], dtype=np.float64)
    b = np.asarray(node.params["bias"], dtype=np.float64) if "bias" in node.params else np.zeros(w.shape[0])
    a = node.attrs
    ex.single(node, ex.conv(node, node.name, node.inputs, x.shape, w, b, a["stride"], a["padding"],
                            a["dilation"], a["groups"]))


@lowering("linear")
def _linear(ex: _Exporter, node: Node):
    x = ex.graph.node(node.inputs[0]).type
    if len(x.shape) != 1:
        _refuse(node, f"a linear layer on a {x.shape} tensor: NIR Affine acts on a vector (N,)",
                "flatten before the linear layer")
    w = np.asarray(node.params["weight"], dtype=np.float64)
    b = np.asarray(node.params["bias"], dtype=np.float64) if "bias" in node.params else np.zeros(w.shape[0])
    ex.single(node, ex.add(node.name, nir.Affine(weight=w, bias=b), node.inputs))


@lowering("avgpool2d")
def _avgpool2d(ex: _Exporter, node: Node):
    if structure.is_conv1d(ex, node):   # AvgPool1d on a (C, L) step viewed as (C, 1, L)
        return structure.pool1d(ex, node)
    a = node.attrs
    if a.get("ceil_mode"):
        _refuse(node, "ceil_mode=True: NIR AvgPool2d (and the importers' torch AvgPool2d) floor the output size")
    if not a.get("count_include_pad", True) and any(a["padding"]):
        _refuse(node, "count_include_pad=False with padding: NIR AvgPool2d divides by the full window")
    pool = nir.AvgPool2d(kernel_size=np.array(a["kernel"]), stride=np.array(a["stride"]),
                         padding=np.array(a["padding"]))
    ex.single(node, ex.add(node.name, pool, node.inputs))


@lowering("maxpool2d")
def _maxpool2d(ex: _Exporter, node: Node):
    if structure.is_conv1d(ex, node):   # MaxPool1d on a (C, L) step viewed as (C, 1, L)
        return structure.maxpool1d(ex, node)
    x = ex.graph.node(node.inputs[0]).type
    a = node.attrs
    if x.kind != "binary":
        _refuse(node, f"max-pool over {x.kind} values: only a max over binary spikes (an OR) has an exact "
                "NIR form")
    if a.get("ceil_mode"):
        _refuse(node, "ceil_mode=True has no Conv2d form")
    c, k = x.shape[0], tuple(a["kernel"])
    window = ex.conv(node, f"{node.name}.window", node.inputs, x.shape, np.ones((c, 1) + k), np.zeros(c),
                     a["stride"], a["padding"], a.get("dilation", (1, 1)), c)
    shape = node.type.shape
    lif = nir.LIF(tau=np.full(shape, ex.dt), r=np.ones(shape), v_leak=np.zeros(shape),
                  v_threshold=np.full(shape, 0.5), v_reset=np.zeros(shape))
    name = ex.add(node.name, lif)
    ex.edges.append((window, name))
    ex.single(node, name)
    ex.notes.append(f"{node.name}: max-pool over binary spikes as an all-ones window sum firing on > 0.5")


@lowering("windowsum")
def _windowsum(ex: _Exporter, node: Node):
    x = ex.graph.node(node.inputs[0]).type
    k, d = node.attrs["kernel"], node.attrs["dilation"]
    c = x.shape[0]
    ex.single(node, ex.conv(node, node.name, node.inputs, x.shape, np.ones((c, 1, k, k)), np.zeros(c), 1,
                            d * (k - 1) // 2, d, c))


lowering("sum")(lambda ex, node: structure.reduction(ex, node))
lowering("mean")(lambda ex, node: structure.reduction(ex, node))


@lowering("flatten")
def _flatten(ex: _Exporter, node: Node):
    x = ex.graph.node(node.inputs[0]).type
    start, end = node.attrs["start"], node.attrs["end"]
    end = end % len(x.shape)
    flat = nir.Flatten(input_type={"input": np.array(x.shape)}, start_dim=start, end_dim=end)
    ex.single(node, ex.add(node.name, flat, node.inputs))


@lowering("delay")
def _delay(ex: _Exporter, node: Node):
    delay = nir.Delay(delay=np.full(node.type.shape, node.attrs["steps"] * ex.dt))
    ex.single(node, ex.add(node.name, delay, node.inputs))


@lowering("add")
def _add(ex: _Exporter, node: Node):
    a, b = (ex.sources[i] for i in node.inputs)
    shared = set(a) & set(b)
    for s in sorted(shared):  # x + x: route one copy through an identity so no edge repeats
        copy = ex.channel_affine(node, f"{node.name}.copy", (), 1.0, 0.0, node.type.shape)
        ex.edges.append((s, copy))
        b = [copy if t == s else t for t in b]
    ex.sources[node.name] = list(a) + list(b)


@lowering("scale")
def _scale(ex: _Exporter, node: Node):
    name = ex.channel_affine(node, node.name, node.inputs, node.attrs["a"], node.attrs["b"], node.type.shape)
    ex.single(node, name)


@lowering("batchnorm")
def _batchnorm(ex: _Exporter, node: Node):
    p = node.params
    scale, shift = bn_scale_shift(p["gamma"], p["beta"], p["mean"], p["var"], node.attrs["eps"])
    ex.single(node, ex.channel_affine(node, node.name, node.inputs, scale, shift, node.type.shape))
    ex.notes.append(f"{node.name}: batch norm as a per-channel affine (equal to ~1e-16 relative)")


@lowering("tdm")
def _tdm(ex: _Exporter, node: Node):
    lam = np.asarray(node.params["lam"], dtype=np.float64)
    shape = node.type.shape
    prev = ex.add(f"{node.name}.prev", nir.Delay(delay=np.full(shape, ex.dt)), node.inputs)
    ex.sources[f"{node.name}.prev"] = [prev]
    now = ex.channel_affine(node, f"{node.name}.now", node.inputs, 1 + lam, 0.0, shape)
    past = ex.channel_affine(node, f"{node.name}.past", (f"{node.name}.prev",), -lam, 0.0, shape)
    ex.sources[node.name] = [now, past]
    ex.notes.append(f"{node.name}: TDM as (1+lambda) x_t + (-lambda) Delay(x)_t")


def _synapse_of(ex: _Exporter, node: Node, beta, bias) -> bool:
    """A never-firing membrane read-out whose one reader is a leaky hard-reset lif: a CubaLIF's current."""
    users = ex.users.get(node.name, [])
    if node.name in ex.graph.outputs or len(users) != 1 or (beta >= 1).any() or (bias != 0).any():
        return False
    user = ex.graph.node(users[0])
    if user.op != LIF or user.inputs != (node.name,) or user.attrs["reset"] != "zero":
        return False
    p = {k: ex.per_neuron(user, np.asarray(v, dtype=np.float64)) for k, v in user.params.items()}
    reads_membrane = user.attrs.get("output", "spikes") == "membrane"
    return bool(((p["beta"] >= 0) & (p["beta"] < 1)).all() and (p["alpha"] > 0).all()
                and (not reads_membrane or (p["threshold"] >= NEVER).all()))


def _lif_key(node: Node) -> tuple:
    """Neurons with one input, parameters and reset are one NIR neuron (a spike and a membrane read of it)."""
    raw = tuple(sorted((k, np.asarray(v, dtype=np.float64).tobytes()) for k, v in node.params.items()))
    return LIF, node.inputs, raw, node.attrs["reset"]


@lowering(LIF)
def _lif(ex: _Exporter, node: Node):
    p = {k: np.asarray(v, dtype=np.float64) for k, v in node.params.items()}
    beta, alpha, bias, theta, v_reset = (ex.per_neuron(node, p[k]) for k in
                                         ("beta", "alpha", "bias", "threshold", "v_reset"))
    membrane = node.attrs.get("output", "spikes") == "membrane"
    reset = node.attrs["reset"]
    if ((beta < 0) | (beta > 1)).any():
        _refuse(node, f"beta outside [0, 1] (min {beta.min():g}, max {beta.max():g}) is not a NIR leak")
    if (alpha == 0).any():
        _refuse(node, "alpha = 0 disconnects the neuron's input; NIR's r = 0 cannot carry the reset form")
    if reset == "subtract" and (beta == 0).all():
        reset = "zero"  # no memory: the reset never reaches the next step (and v_reset is unused)
        v_reset = np.zeros_like(v_reset)
    syn = ex.synapses.pop(node.inputs[0], None)
    if syn is not None:  # the membrane of a CubaLIF (CubaLI when it never fires) fed by its current
        fire = not (membrane and (theta >= NEVER).all())
        mem = {"beta": beta, "alpha": alpha, "bias": bias, "theta": theta, "v_reset": v_reset}
        cuba, ok = forms.cuba(ex.form, syn, mem, fire)
        ex.exact_params &= ok
        ex.notes.append(f"{node.name}: its current {node.inputs[0]!r} and membrane as NIR {type(cuba).__name__}")
        return ex.single(node, ex.add(node.name, cuba, syn["inputs"]))
    if reset == "zero" and membrane and (theta >= NEVER).all():  # never fires: a leaky integrator
        if _synapse_of(ex, node, beta, bias):
            ex.synapses[node.name] = {"beta": beta, "alpha": alpha, "inputs": node.inputs}
            ex.sources[node.name] = []
            return None
        state, ok = forms.li(ex.form, beta, alpha, bias)
        ex.exact_params &= ok
        return ex.single(node, ex.add(node.name, state, node.inputs))
    key = _lif_key(node)
    known = ex.neurons.setdefault(key, {})
    if reset == "zero":
        if membrane:
            _refuse(node, "the membrane of a hard-reset neuron that can fire is not an output of a NIR neuron",
                    "read the membrane of a subtract-reset neuron, or read spikes")
        if "spikes" in known:
            return ex.single(node, known["spikes"])
        name = ex.hard_reset(node, beta, alpha, bias, theta, v_reset)
        known["spikes"] = name
        return ex.single(node, name)
    membrane_read = any(n.op == LIF and n.attrs.get("output", "spikes") == "membrane" and _lif_key(n) == key
                        for n in ex.graph.nodes)
    if not known and not membrane_read:   # spikes only: the CubaLIF cycle the consumers read, where it applies
        known["spikes"] = composed.lif_subtract(ex, node, beta, alpha, bias, theta)
        if known["spikes"] is None:
            del known["spikes"]
    if "membrane" not in known and "spikes" not in known:
        known["membrane"], known["spikes"] = ex.subtract_reset(node, beta, alpha, bias, theta)
    ex.single(node, known["membrane" if membrane else "spikes"])


@lowering(SYNAPTIC_SNNTORCH)
def _synaptic(ex: _Exporter, node: Node):
    """A Synaptic / RSynaptic that NIR's CubaLIF computes (zero reset on the spiking step, ``theta >= 0``, read as
    spikes; a dense recurrence summed with the input first, ``rec_add="input"``, as a NIR file read by spikec
    gives): ``CubaLIF`` (``forms.cuba``: current ``alpha``, membrane ``beta``, firing ``mem > theta``) and the
    recurrence as an ``Affine``/``Linear`` cycle back into it (read one step late, its bias at the first step)."""
    a, prm = node.attrs, node.params
    p = {k: ex.per_neuron(node, np.asarray(prm[k], dtype=np.float64)) for k in ("alpha", "beta", "threshold")}
    recurrent = a.get("recurrent", "none")
    if a["reset"] != "zero" or a["reset_delay"] or a.get("read", "spikes") != "spikes" or \
            (p["threshold"] < 0).any() or recurrent not in ("none", "linear") or \
            (recurrent == "linear" and a.get("rec_add", "after") != "input"):
        _refuse(node, VARIANT_REASONS[SYNAPTIC_SNNTORCH], REMEDIES[SYNAPTIC_SNNTORCH])
    ones, zeros = np.ones_like(p["beta"]), np.zeros_like(p["beta"])
    mem = {"beta": p["beta"], "alpha": ones, "bias": zeros, "theta": np.nextafter(p["threshold"], np.inf),
           "v_reset": zeros}
    cuba, ok = forms.cuba(ex.form, {"beta": p["alpha"], "alpha": ones}, mem, True)
    ex.exact_params &= ok
    name = ex.add(node.name, cuba, node.inputs)
    ex.single(node, name)
    if recurrent == "linear":
        w = np.asarray(prm["weight"], dtype=np.float64)
        fb = nir.Affine(weight=w, bias=np.asarray(prm["bias"], dtype=np.float64)) if "bias" in prm else \
            nir.Linear(weight=w)
        rec = ex.add(a.get("nir_feedback", f"{node.name}.w_rec"), fb)
        ex.edges += [(name, rec), (rec, name)]
        ex.notes.append(f"{node.name}: RSynaptic as NIR CubaLIF with its recurrence {rec!r} as a cycle")
    else:
        ex.notes.append(f"{node.name}: Synaptic (zero reset) as NIR CubaLIF")


@lowering(LIF_SJ)
def _lif_sj(ex: _Exporter, node: Node):
    """SpikingJelly's hard-reset (v_reset = 0) charge with decay_input=True as NIR LIF in the norse scheme
    (``forms.sj_lif``): exactly its step when ``k`` is ``1/tau`` for a power-of-two ``tau`` or PLIF's decay."""
    p = {k: float(v) for k, v in node.params.items()}
    k = p.get("decay", 1 / p["tau"] if "tau" in p else None)   # None: an IFNode (SpikingJelly's tau is > 1)
    if "v_reset" not in p and node.attrs["decay_input"] and k is not None and 0 < k < 1:
        return composed.sj_soft(ex, node, k, p["threshold"])   # a soft reset: a CubaLIF cycle
    why = [w for w, bad in (
        ("an IFNode charge with another reset", k is None),
        ("decay_input=False", not node.attrs["decay_input"]),
        ("a soft reset (v_reset=None)" if "v_reset" not in p else f"v_reset = {p.get('v_reset')}",
         p.get("v_reset", None) != 0.0),
        (f"tau = {p.get('tau')} is not a power of two", "tau" in p and np.log2(p["tau"]) != np.round(np.log2(p["tau"]))),
        ("a decay outside (0, 1]", k is not None and not 0 < k <= 1),
        ("written for the snnTorch consumer", ex.form.scheme != "norse")) if bad]
    if why:
        _refuse(node, f"{'; '.join(why)}: " + VARIANT_REASONS[LIF_SJ], REMEDIES[LIF_SJ])
    lif, ok = forms.sj_lif(ex.form, k, p["threshold"], node.type.shape)
    ex.exact_params &= ok
    ex.notes.append(f"{node.name}: SpikingJelly's hard-reset charge as NIR LIF, scheme 'norse' (dt/tau = {k:g})")
    ex.single(node, ex.add(node.name, lif, node.inputs))


LOWERINGS["reshape"] = structure.reshape
LOWERINGS[LIF_NORSE] = lambda ex, node: composed.norse_lif(ex, node, VARIANT_REASONS[LIF_NORSE],
                                                            REMEDIES[LIF_NORSE])
LOWERINGS[LIF_SNNTORCH] = lambda ex, node: composed.snntorch_leaky(ex, node, VARIANT_REASONS[LIF_SNNTORCH],
                                                                    REMEDIES[LIF_SNNTORCH])


def export(graph: Graph, dt: float | None = None, consumer: str = CONSUMER) -> Exported:
    """Export ``graph`` (the IR after passes) to NIR in the form ``forms.form_for`` picks (its source's dt and
    scheme, or the default; ``consumer``'s form); raises UnsupportedOp naming the first inexpressible node."""
    return _Exporter(graph, form_for(graph, dt, consumer)).run()


def metadata(graph: Graph, ex: Exported, dt: float | None = None) -> dict:
    """What a reader needs to run the file as the source ran: dt, discretization, firing convention, names."""
    import json
    form = ex.form or form_for(graph, dt)
    mapping = {"carriers": ex.carriers, "sources": {k: v for k, v in ex.sources.items()}, "outputs": ex.outputs,
               "output_shapes": {o: list(graph.node(o).type.shape) for o in graph.outputs},
               "notes": ex.notes, "bit_exact_params": ex.bit_exact_params,
               "form": {"consumer": form.consumer, "time_base": form.origin}, "read_over_time": ex.over_time}
    sinabs = form.scheme == SINABS
    return {"format": FORMAT, "version": VERSION, "dt": float(form.dt), "time_unit": "s", "scheme": form.scheme,
            "discretization": SINABS_DISCRETIZATION if sinabs else DISCRETIZATION,
            **({"consumer_scheme": SINABS_LABEL} if sinabs else {}),
            **({"read_over_time": json.dumps(ex.over_time, sort_keys=True)} if ex.over_time else {}), "firing": FIRING, "initial_state": "all neuron states start at 0",
            "source": str(graph.meta.get("source", "")), "spikec": json.dumps(mapping, sort_keys=True)}


def export_graph(graph: Graph, dt: float | None = None, consumer: str = CONSUMER) -> Exported:
    """``export`` with the graph's metadata filled in (what the NIR target writes)."""
    ex = export(graph, dt, consumer)
    ex.graph.metadata = metadata(graph, ex)
    return ex
