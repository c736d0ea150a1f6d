"""The coverage table's example graphs (``spikec.targets.coverage``): for each op of the IR a small seeded graph
that uses it, with its inputs (``EXAMPLES``), and one graph per reset variant of a neuron op (``VARIANTS``).

Dyadic weights (multiples of 1/16) keep every sum exact in any summation order; the inputs are seeded spikes
``[STEPS, BATCH, ...]``.
"""
import numpy as np

from spikec.core.builder import GraphBuilder

STEPS, BATCH = 4, 2

# the plain neurons' threshold: 0.375 + 1/256, off the grid of 1/128 the dyadic weights and beta = 0.5 keep the
# membrane on over STEPS steps, so no membrane ties the threshold: spikec fires on U >= theta (the NIR file's
# nextafter(theta, -inf) threshold), which the float32 consumers cannot reproduce at an exact tie
OFF_GRID = 0.375 + 1 / 256


class _Builder(GraphBuilder):
    def __init__(self, seed: int, shape: tuple, kind: str = "binary"):
        super().__init__(shape, kind)
        self.rng = np.random.default_rng(seed)

    def weights(self, *shape) -> np.ndarray:
        return self.rng.integers(-4, 9, shape) / 16.0

    def linear(self, name, x, n_out) -> str:
        n_in = self.types[x].shape[-1]
        return self.add(name, "linear", [x], {}, {"weight": self.weights(n_out, n_in), "bias": self.weights(n_out)})

    def conv(self, name, x, c_out, padding=1) -> str:
        c_in = self.types[x].shape[0]
        return self.add(name, "conv2d", [x], {"stride": (1, 1), "padding": (padding, padding), "dilation": (1, 1),
                                              "groups": 1}, {"weight": self.weights(c_out, c_in, 3, 3)})

    def lif(self, name, x, reset="zero") -> str:
        c = self.types[x].shape[0]
        return self.add(name, "lif", [x], {"reset": reset},
                        {"beta": np.full(c, 0.5), "alpha": np.ones(c), "bias": np.zeros(c),
                         "threshold": np.full(c, OFF_GRID), "v_reset": np.zeros(c)})


def _spikes(seed, shape) -> np.ndarray:
    return (np.random.default_rng(seed).random((STEPS, BATCH, *shape)) < 0.4).astype(np.float64)


def _dense(op_fn, shape=(8,)):
    """input -> linear -> [the op] -> lif: the op on a real-valued synaptic current."""
    def build():
        b = _Builder(1, shape)
        y = op_fn(b, b.linear("fc", "x", 6))
        return b.graph(b.lif("out", y)), _spikes(2, shape)
    return build


def _conv(op_fn, shape=(2, 6, 6)):
    """input -> conv -> [the op] -> lif (on a (C, H, W) current)."""
    def build():
        b = _Builder(3, shape)
        y = op_fn(b, b.conv("conv", "x", 3))
        return b.graph(b.lif("out", y)), _spikes(4, shape)
    return build


def _time_readout(op="time_sum", attrs=(("mean", True),), spikes=True):
    """input -> linear -> lif -> a read-out over time of its spikes (the mean: SpikingJelly's rate read-out
    ``out.mean(0)``) or of the linear layer's values (the maximum: Norse's ``voltages.max(0)``), read at the last
    step: the model's output."""
    b = _Builder(31, (8,))
    y = b.linear("fc", "x", 6)
    s = b.lif("lif", y)
    return b.graph(b.add("rate", op, [s if spikes else y], {**dict(attrs), "read": "last"})), _spikes(32, (8,))


def _spiking(op_fn, shape=(2, 6, 6)):
    """input -> conv -> lif -> [the op on spikes] -> flatten -> linear -> lif."""
    def build():
        b = _Builder(5, shape)
        s = op_fn(b, b.lif("lif", b.conv("conv", "x", 3)))
        head = b.add("flat", "flatten", [s], {"start": 0, "end": -1}) if len(b.types[s].shape) > 1 else s
        return b.graph(b.lif("out", b.linear("head", head, 4))), _spikes(6, shape)
    return build


def _neuron(op, params, attrs):
    def build():
        b = _Builder(7, (8,))
        y = b.add("out", op, [b.linear("fc", "x", 6)], attrs, {k: np.full(6, v) for k, v in params.items()})
        return b.graph(y), _spikes(8, (8,))
    return build


def _bn(c):
    rng = np.random.default_rng(9)
    return {"gamma": rng.uniform(0.5, 1.5, c), "beta": rng.normal(0, 0.3, c), "mean": rng.normal(0, 0.3, c),
            "var": rng.uniform(0.5, 2.0, c)}


def _pool(op):
    return _spiking(lambda b, s: b.add("pool", op, [s], {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0)}))


def _two_branches(op):
    def build():
        b = _Builder(10, (8,))
        left, right = b.lif("a", b.linear("fa", "x", 6)), b.lif("b", b.linear("fb", "x", 6))
        y = b.add("both", op, [left, right])
        return b.graph(b.lif("out", b.linear("head", y, 4))), _spikes(11, (8,))
    return build


def _attention(extra=None):
    """q (4x4 spikes) @ k (4x4 spikes) -> [extra] -> flatten -> linear -> lif (tokens x features input)."""
    def build():
        b = _Builder(12, (4, 4))
        q, k = b.lif("q", b.linear("fq", "x", 4)), b.lif("k", b.linear("fk", "x", 4))
        y = b.add("qk", "matmul", [q, k])
        y = extra(b, y) if extra else y
        flat = b.add("flat", "flatten", [y], {"start": 0, "end": -1})
        return b.graph(b.lif("out", b.linear("head", flat, 4))), _spikes(13, (4, 4))
    return build


def _dsmpa():
    """As RIPE wires it: a neuron's membrane U and its spikes delayed a step gate the next conv's current."""
    b = _Builder(14, (2, 4, 4))
    c = b.conv("conv", "x", 2)
    s = b.lif("lif", c, "subtract")   # its membrane twin below reads a subtract-reset run
    params = dict(next(n for n in b.nodes if n.name == "lif").params)
    u = b.add("lif.membrane", "lif", [c], {"reset": "subtract", "output": "membrane"}, params)
    prev = b.add("prev", "delay", [s], {"steps": 1})
    w = lambda: b.weights(2, 2)
    y = b.add("mpa", "dsmpa", [u, prev, b.conv("conv2", s, 2)], {"eps": 1e-5},
              {"wq": w(), "wk": w(), "wv": w(), "gamma": np.ones(2)})
    return b.graph(b.lif("out", y)), _spikes(15, (2, 4, 4))


def _unrolled():
    b = _Builder(16, (8,))
    params = {"beta": np.full(6, 0.5), "alpha": np.ones(6), "threshold": np.full(6, 0.25)}
    s = b.add("int", "intfire_unrolled", [b.linear("fc", "x", 6)], {"max_spikes": 3, "rounding": "round"}, params)
    y = b.add("sum", "substep_sum", [b.linear("head", s, 4)])
    return b.graph(b.lif("out", y)), _spikes(17, (8,))


def _traced(make_model, shape):
    """A model of a framework's module, traced by the frontend (the op is what its converter emits)."""
    def build():
        import torch
        from spikec.frontend import trace
        torch.manual_seed(0)
        model = make_model().double().eval()
        return trace(model, shape), _spikes(18, shape)
    return build


# -- the frameworks' exact neurons (spikec/frontend): each example reads every sequence the op can output (the
# spikes and each state read-out are graph outputs), so a target that gets one read-out wrong fails its cell
def _reads(b, name, op, x, attrs, params, reads) -> list[str]:
    """The op's node ``name`` (its first read) and one ``name.<read>`` node per further read, all of one run."""
    import spikec.frontend  # noqa: F401  (the converters define these ops)
    names = [name] + [f"{name}.{r}" for r in reads[1:]]
    for node, read in zip(names, reads):
        b.add(node, op, [x], {**attrs, "read": read}, params)
    return names


def _snntorch_leaky():
    """Leaky, snnTorch's default subtract reset with reset_delay, its spikes and mem (a 0-dim threshold: the
    reset subtracts it rounded to float32)."""
    b = _Builder(19, (8,))
    outs = _reads(b, "out", "lif_snntorch", b.linear("fc", "x", 6), {"reset": "subtract", "reset_delay": True},
                  {"beta": np.array(0.875), "threshold": np.array(1.1)}, ("spikes", "mem"))
    return b.graph(*outs), _spikes(20, (8,))


def _snntorch_synaptic():
    """RSynaptic (a linear recurrence), its spikes, syn and mem."""
    b = _Builder(21, (8,))
    params = {"alpha": np.array(0.75), "beta": np.array(0.875), "threshold": np.array(2.2),
              "weight": b.weights(6, 6), "bias": b.weights(6)}
    outs = _reads(b, "out", "synaptic_snntorch", b.linear("fc", "x", 6),
                  {"reset": "subtract", "reset_delay": True, "recurrent": "linear"}, params, ("spikes", "syn", "mem"))
    return b.graph(*outs), _spikes(22, (8,))


def _snntorch_rleaky():
    """RLeaky with a conv2d recurrence, zero reset without delay, per-channel beta and threshold; spikes, mem."""
    b = _Builder(23, (2, 6, 6))
    params = {"beta": np.array([0.5, 0.75, 0.875]), "threshold": np.array([0.75, 1.0, 1.25]),
              "weight": b.weights(3, 3, 3, 3), "bias": b.weights(3)}
    outs = _reads(b, "out", "rleaky_snntorch", b.conv("conv", "x", 3),
                  {"reset": "zero", "reset_delay": False, "recurrent": "conv2d", "padding": [1, 1]}, params,
                  ("spikes", "mem"))
    return b.graph(*outs), _spikes(24, (2, 6, 6))


def _snntorch_alpha():
    """Alpha, its spikes, excitatory and inhibitory currents and mem."""
    b = _Builder(25, (8,))
    a, bb = np.array(0.875), np.array(0.75)
    params = {"alpha": a, "beta": bb, "threshold": np.array(0.25), "tau": np.log(a) / (np.log(bb) - np.log(a)) + 1}
    outs = _reads(b, "out", "alpha_snntorch", b.linear("fc", "x", 6), {"reset": "subtract"}, params,
                  ("spikes", "syn_exc", "syn_inh", "mem"))
    return b.graph(*outs), _spikes(26, (8,))


def _spikingjelly_lif():
    """ParametricLIFNode (decay = sigmoid(w), soft reset) then LIFNode (tau = 3, decay_input=False, hard reset)."""
    import spikec.frontend  # noqa: F401  (the converters define these ops)
    b = _Builder(27, (8,))
    plif = b.add("plif", "lif_sj", [b.linear("fc", "x", 6)], {"decay_input": True},
                 {"threshold": np.array(0.5), "decay": np.array(1 / (1 + np.exp(0.5)))})
    out = b.add("out", "lif_sj", [b.linear("head", plif, 4)], {"decay_input": False},
                {"threshold": np.array(0.25), "tau": np.array(3.0), "v_reset": np.array(0.0)})
    return b.graph(out, plif), _spikes(28, (8,))


def _spikingjelly_nonlinear(op, params):
    """QIFNode / EIFNode / IzhikevichNode (spikec/frontend/spikingjelly_nonlinear.py), hard reset."""
    def build():
        import spikec.frontend  # noqa: F401  (the converters define these ops)
        b = _Builder(41, (8,))
        out = b.add("out", op, [b.linear("fc", "x", 6)], {},
                    {"threshold": np.array(0.5), "tau": np.array(2.0), "v_rest": np.array(0.0),
                     "v_reset": np.array(-0.125), **{k: np.array(v) for k, v in params.items()}})
        return b.graph(out), _spikes(42, (8,))
    return build


def _sinabs_lif():
    """Sinabs IAF (MultiSpike counts, subtract) then LIF (SingleSpike, MembraneReset) (spikec/frontend/sinabs.py)."""
    import spikec.frontend.sinabs  # noqa: F401  (defines lif_sinabs)
    b = _Builder(43, (8,))
    iaf = b.add("iaf", "lif_sinabs", [b.linear("fc", "x", 6)], {"spike": "multi", "reset": "subtract",
                                                                 "norm_input": False},
                {"alpha_mem": np.array(1.0), "threshold": np.array(0.25)})
    out = b.add("out", "lif_sinabs", [b.linear("head", iaf, 4)], {"spike": "single", "reset": "reset",
                                                                   "norm_input": True},
                {"alpha_mem": np.array(0.75), "threshold": np.array(0.125), "reset_value": np.array(0.0)})
    return b.graph(out, iaf), _spikes(44, (8,))


def _norse_lif():
    """LIFCell (a current, reset to a value), its spikes, v and i."""
    b = _Builder(29, (8,))
    params = {"dt_tau_mem_inv": np.array(0.25), "dt_tau_syn_inv": np.array(0.5), "v_leak": np.array(0.0),
              "threshold": np.array(0.375), "v_reset": np.array(0.0)}
    outs = _reads(b, "out", "lif_norse", b.linear("fc", "x", 6), {"current": True, "reset": "value"}, params,
                  ("spikes", "v", "i"))
    return b.graph(*outs), _spikes(30, (8,))


def _norse_li():
    """LICell (a current), its v and i."""
    b = _Builder(31, (8,))
    params = {"dt_tau_mem_inv": np.array(0.25), "dt_tau_syn_inv": np.array(0.5), "v_leak": np.array(0.125)}
    outs = _reads(b, "out", "li_norse", b.linear("fc", "x", 6), {"current": True}, params, ("v", "i"))
    return b.graph(*outs), _spikes(32, (8,))


def _norse_more(op, extra, reads):
    """LIFRecurrentCell, LIFAdExCell, LSNNCell (``extra(b)``: their own params), spikes and every state leaf."""
    def build():
        b = _Builder(39, (8,))
        params = {"dt_tau_mem_inv": np.array(0.25), "dt_tau_syn_inv": np.array(0.5), "v_leak": np.array(0.0),
                  "threshold": np.array(0.375), "v_reset": np.array(0.0), **extra(b)}
        outs = _reads(b, "out", op, b.linear("fc", "x", 6), {}, params, reads)
        return b.graph(*outs), _spikes(40, (8,))
    return build


def _sdna_pairwise():
    """Spiking q, k, v (conv -> LIF each) through pairwise SDNA attention."""
    from torch import nn
    from spikec.nn import LIF, SDNAPairwise, TimeDistributed

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (nn.Sequential(TimeDistributed(nn.Conv2d(2, 2, 3, padding=1)),
                                                    LIF(beta=0.5, threshold=0.375)) for _ in range(3))
            self.attn = SDNAPairwise(kernel_size=3, threshold=0.5, max_spikes=2)

        def forward(self, x):
            return self.attn(self.q(x), self.k(x), self.v(x))
    return Block()


def _loihi():
    """spikec.nn.loihi: Dense with a negative weight exponent (linear + loihi_shift) into a Loihi LIF, a read-out."""
    from torch import nn
    from spikec.nn import loihi
    return nn.Sequential(loihi.Dense(5, 6, weight_exp=-1, bias=True, init_scale=400.0),
                         loihi.LIF(du=100, dv=300, vth=20, bias_mant=50.0, bias_exp=2, reset="subtract"),
                         loihi.Dense(6, 3, init_scale=200.0))


def _where():
    """where(spikes of one branch, a linear's current, another's)."""
    b = _Builder(46, (8,))
    cond = b.lif("a", b.linear("fa", "x", 6))
    y = b.add("pick", "where", [cond, b.linear("fb", "x", 6), b.linear("fc", "x", 6)])
    return b.graph(b.lif("out", y)), _spikes(47, (8,))


def _divide():
    """a / b, b a current kept in [1.7, 2.6] (scale 0.125 x + 2): no division by zero."""
    b = _Builder(48, (8,))
    den = b.add("den", "scale", [b.linear("fb", "x", 6)], {"a": 0.125, "b": 2.0})
    y = b.add("quot", "divide", [b.linear("fa", "x", 6), den])
    return b.graph(b.lif("out", y)), _spikes(49, (8,))


def _expand():
    b = _Builder(50, (8,))
    y = b.add("wide", "expand", [b.linear("fc", "x", 1)], {"shape": (6,)})
    return b.graph(b.lif("out", y)), _spikes(51, (8,))


def _xylo():
    """spikec.nn.xylo: a recurrent Hidden population into an Output population (Xylo's one form)."""
    from torch import nn
    from spikec.nn import xylo
    return nn.Sequential(xylo.Hidden(8, 6, recurrent=True, dash_mem=2, dash_syn=1, threshold=40, bias=3.0,
                                     init_scale=40.0),
                         xylo.Output(6, 3, dash_mem=1, dash_syn=1, threshold=30, init_scale=40.0))


EXAMPLES = {
    "conv2d": _conv(lambda b, y: y),
    "linear": _dense(lambda b, y: y),
    "windowsum": _spiking(lambda b, s: b.add("ws", "windowsum", [s], {"kernel": 3, "dilation": 1})),
    "batchnorm": _conv(lambda b, y: b.add("bn", "batchnorm", [y], {"eps": 1e-5}, _bn(3))),
    "bntt": _conv(lambda b, y: b.add("bntt", "bntt", [y], {"eps": 1e-5},
                                     {k: np.tile(v, (STEPS, 1)) for k, v in _bn(3).items()})),
    "scale": _dense(lambda b, y: b.add("sc", "scale", [y], {"a": 0.5, "b": 0.125})),
    "tdm": _conv(lambda b, y: b.conv("conv2", b.add("tdm", "tdm", [y], {}, {"lam": np.full(3, 0.25)}), 3)),
    "delay": _spiking(lambda b, s: b.add("later", "delay", [s], {"steps": 1})),
    "step_bias": _dense(lambda b, y: b.add("sb", "step_bias", [y], {}, {"bias": b.weights(STEPS, 6)})),
    "time_sum": _time_readout,
    "time_max": lambda: _time_readout("time_max", (), spikes=False),
    "avgpool2d": _pool("avgpool2d"),
    "maxpool2d": _pool("maxpool2d"),
    "flatten": _spiking(lambda b, s: s),
    "reshape": _spiking(lambda b, s: b.add("rs", "reshape", [s], {"shape": (3, 36)})),
    "transpose": _spiking(lambda b, s: b.add("tr", "transpose", [s], {"perm": (0, 2, 1)})),
    "concat": _spiking(lambda b, s: b.add("cat", "concat", [s, s], {"axis": 0})),
    "slice": _spiking(lambda b, s: b.add("part", "slice", [s], {"dim": 1, "start": 1, "stop": 5, "step": 2})),
    "sum": _spiking(lambda b, s: b.add("total", "sum", [s], {"dims": (1,), "keepdim": False})),
    "mean": _conv(lambda b, y: b.add("avg", "mean", [y], {"dims": (2,), "keepdim": True})),
    "div": _dense(lambda b, y: b.add("quot", "div", [y], {"divisor": 3.0})),
    "amax": _spiking(lambda b, s: b.add("peak", "amax", [s], {"dims": (1,), "keepdim": False})),
    "clamp": _dense(lambda b, y: b.add("clip", "clamp", [y], {"lo": -0.25, "hi": 0.5})),
    "sigmoid": _dense(lambda b, y: b.add("sig", "sigmoid", [y])),
    "tanh": _dense(lambda b, y: b.add("th", "tanh", [y])),
    "relu": _dense(lambda b, y: b.linear("fc2", b.add("relu", "relu", [y]), 6)),
    "add": _two_branches("add"),
    "mul": _two_branches("mul"),
    "matmul": _attention(),
    "softmax": _attention(lambda b, y: b.add("sm", "softmax", [y], {"dim": 1})),
    "causal_mask": _attention(lambda b, y: b.add("mask", "causal_mask", [y])),
    "dsmpa": _dsmpa,
    "lif": _neuron("lif", {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 0.375, "v_reset": 0.0},
                   {"reset": "subtract"}),
    "intfire": _neuron("intfire", {"beta": 0.5, "alpha": 1.0, "threshold": 0.25},
                       {"max_spikes": 3, "rounding": "round"}),
    "silif": _neuron("silif", {"decay": 0.75, "b": 1.0, "threshold": 0.375}, {"kappa": 0.5}),
    "csilif": _neuron("csilif", {"a_re": 0.5, "a_im": 0.25, "b": 1.0, "threshold": 0.375}, {"kappa": 0.5}),
    "intfire_unrolled": _unrolled,
    "substep_sum": _unrolled,
    "lif_snntorch": _snntorch_leaky,
    "synaptic_snntorch": _snntorch_synaptic,
    "rleaky_snntorch": _snntorch_rleaky,
    "alpha_snntorch": _snntorch_alpha,
    "lif_sj": _spikingjelly_lif,
    "qif_sj": _spikingjelly_nonlinear("qif_sj", {"a0": 1.0, "v_c": 0.75}),
    "eif_sj": _spikingjelly_nonlinear("eif_sj", {"delta_T": 1.0, "theta_rh": 0.75}),
    "izhikevich_sj": _spikingjelly_nonlinear("izhikevich_sj", {"a0": 1.0, "v_c": 0.75, "tau_w": 2.0, "a": 0.25,
                                                               "b": 0.125, "w_rest": 0.0}),
    "lif_sinabs": _sinabs_lif,
    "lif_norse": _norse_lif,
    "li_norse": _norse_li,
    "lif_recurrent_norse": _norse_more("lif_recurrent_norse", lambda b: {
        "input_weights": b.weights(5, 6), "recurrent_weights": b.weights(5, 5)}, ("spikes", "v", "i")),
    "lif_adex_norse": _norse_more("lif_adex_norse", lambda b: {
        "dt_tau_ada_inv": np.array(0.125), "delta_T": np.array(0.5), "adaptation_current": np.array(0.25),
        "adaptation_spike": np.array(0.125)}, ("spikes", "v", "i", "a")),
    "lsnn_norse": _norse_more("lsnn_norse", lambda b: {"dt_tau_adapt_inv": np.array(0.125), "beta": np.array(0.25)},
                              ("spikes", "v", "i", "b")),
    "sdna_pairwise": _traced(_sdna_pairwise, (2, 5, 5)),
    "loihi_lif": _traced(_loihi, (5,)),
    "loihi_shift": _traced(_loihi, (5,)),
    "xylo_lif": _traced(_xylo, (8,)),
    # the ATen capture's ops (spikec/ops/tensor.py)
    "compare": _dense(lambda b, y: b.add("gt", "compare", [y], {"op": "gt", "value": 0.25})),
    "where": _where,
    "expand": _expand,
    "index_select": _dense(lambda b, y: b.add("pick", "index_select", [y], {"dim": 0, "indices": (0, 2, 3, 5)})),
    "divide": _divide,
    "const_binary": _dense(lambda b, y: b.add("times", "const_binary", [y], {"op": "mul"}, {"value": b.weights(6)})),
    "math": _dense(lambda b, y: b.add("mag", "math", [y], {"fn": "abs"})),
    "var": _conv(lambda b, y: b.add("spread", "var", [y], {"dims": (1, 2), "correction": 1, "keepdim": True})),
    "log_softmax": _dense(lambda b, y: b.add("lsm", "log_softmax", [y], {"dim": 0})),
    "gelu": _dense(lambda b, y: b.add("act", "gelu", [y], {"approximate": "none"})),
    "adaptive_avgpool2d": _conv(lambda b, y: b.add("pool", "adaptive_avgpool2d", [y], {"size": (2, 2)})),
    "conv_transpose2d": _conv(lambda b, y: b.add("up", "conv_transpose2d", [y], {
        "stride": (2, 2), "padding": (1, 1), "output_padding": (1, 1), "dilation": (1, 1), "groups": 1},
        {"weight": b.weights(3, 2, 3, 3), "bias": b.weights(2)})),
}


# -- neuron ops per reset variant: one row each (the op's EXAMPLES entry is one of them). Each reads the spikes and
# the membrane (a read-out of a state is part of what a target must reproduce); the current reads have rows of
# their own, as the targets treat them apart.
def _variant(op, attrs, params, reads=("spikes", "mem"), seed=33, shape=(8,)):
    def build():
        b = _Builder(seed, shape)
        outs = _reads(b, "out", op, b.linear("fc", "x", 6), attrs, params, reads)
        return b.graph(*outs), _spikes(seed + 1, shape)
    return build


def _lif(reset):
    def build():
        b = _Builder(35, (8,))
        params = {"beta": np.full(6, 0.5), "alpha": np.ones(6), "bias": np.zeros(6),
                  "threshold": np.full(6, OFF_GRID), "v_reset": np.zeros(6)}
        s = b.add("out", "lif", [b.linear("fc", "x", 6)], {"reset": reset}, params)
        m = b.add("out.membrane", "lif", ["fc"], {"reset": reset, "output": "membrane"},
                  params)
        return b.graph(s, m), _spikes(36, (8,))
    return build


_LEAKY = {"beta": np.array(0.875), "threshold": np.array(1.1)}
_SYN = {"alpha": np.array(0.75), "beta": np.array(0.875), "threshold": np.array(1.1)}
_SJ_SOFT = {"threshold": np.array(0.5), "decay": np.array(1 / (1 + np.exp(0.5)))}
_SJ_HARD = {"threshold": np.array(0.25), "tau": np.array(3.0), "v_reset": np.array(0.0)}
_NORSE = {"dt_tau_mem_inv": np.array(0.25), "dt_tau_syn_inv": np.array(0.5), "v_leak": np.array(0.0),
          "threshold": np.array(0.375), "v_reset": np.array(0.0)}
_NORSE_BOX = {k: v for k, v in _NORSE.items() if k != "dt_tau_syn_inv"}
_LI = {"dt_tau_mem_inv": np.array(0.25), "dt_tau_syn_inv": np.array(0.5), "v_leak": np.array(0.125)}


def _one_to_one(reset, delay):
    p = dict(_LEAKY, V=np.array(0.5))
    return _variant("rleaky_snntorch", {"reset": reset, "reset_delay": delay, "recurrent": "one_to_one"}, p)


VARIANTS = {   # op: {variant: example}, the rows of the neuron ops
    "lif": {"subtract": _lif("subtract"), "zero": _lif("zero")},
    "lif_snntorch": {
        **{f"{r}, reset_delay={d}": _variant("lif_snntorch", {"reset": r, "reset_delay": d}, _LEAKY)
           for r in ("subtract", "zero") for d in (True, False)},
        "none": _variant("lif_snntorch", {"reset": "none", "reset_delay": False}, _LEAKY)},
    "synaptic_snntorch": {
        **{f"{r}, reset_delay={d}": _variant("synaptic_snntorch", {"reset": r, "reset_delay": d, "recurrent": "none"},
                                             _SYN) for r, d in (("subtract", True), ("zero", False))},
        "none": _variant("synaptic_snntorch", {"reset": "none", "reset_delay": False, "recurrent": "none"}, _SYN),
        "RSynaptic linear, zero, reset_delay=False": _variant(
            "synaptic_snntorch", {"reset": "zero", "reset_delay": False, "recurrent": "linear"},
            dict(_SYN, weight=np.random.default_rng(37).integers(-4, 9, (6, 6)) / 16.0, bias=np.full(6, 0.0625))),
        "RSynaptic linear, reads syn": _snntorch_synaptic,
        "NIR CubaLIF cycle (linear, zero, rec_add=input)": _variant(
            "synaptic_snntorch", {"reset": "zero", "reset_delay": False, "recurrent": "linear", "rec_add": "input"},
            dict(_SYN, weight=np.random.default_rng(39).integers(-4, 9, (6, 6)) / 16.0), ("spikes",))},
    "rleaky_snntorch": {"one_to_one, subtract, reset_delay=True": _one_to_one("subtract", True),
                        "conv2d, zero, reset_delay=False": _snntorch_rleaky},
    "lif_sj": {"soft (PLIF)": _variant("lif_sj", {"decay_input": True}, _SJ_SOFT, ("spikes",)),
               "hard (v_reset=0)": _variant("lif_sj", {"decay_input": False}, _SJ_HARD, ("spikes",)),
               "LIFNode default (tau=2, decay_input, v_reset=0)": _variant(
                   "lif_sj", {"decay_input": True}, dict(_SJ_HARD, tau=np.array(2.0), threshold=np.array(OFF_GRID)),
                   ("spikes",))},
    "lif_norse": {"LIFCell, value": _variant("lif_norse", {"current": True, "reset": "value"}, _NORSE, ("spikes", "v")),
                  **{f"LIFBoxCell, {r}": _variant("lif_norse", {"current": False, "reset": r}, _NORSE_BOX,
                                                          ("spikes", "v"))
                     for r in ("value", "subtract")},
                  "LIFCell, value, reads i": _norse_lif},
    "li_norse": {"reads v": _variant("li_norse", {"current": True}, _LI, ("v",)), "reads i": _norse_li},
}
