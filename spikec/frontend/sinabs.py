"""Sinabs 3.1 neuron layers (``IAF``, ``LIF``, ``ExpLeak`` and their ``Squeeze`` forms) onto the framework-exact
``lif_sinabs`` op defined here; registered only when Sinabs imports.

Sinabs puts the batch first: ``IAF``/``LIF``/``ExpLeak`` take ``[B, T, ...]``, the ``Squeeze`` layers take
``[B*T, ...]`` (batch-major: ``reshape(batch_size, num_timesteps, ...)``), and every layer keeps its state
(``v_mem``, ``i_syn``) in buffers from one call to the next. spikec's tensors are ``[T, B, ...]``, and its own
``flatten(0, 1)`` merge is time-major: neither layout is Sinabs's. ``SinabsNet(net)`` is the adapter: it feeds
``net`` Sinabs's layout (``x.transpose(0, 1)``, flattened for a network of Squeeze layers), gives the output
back as ``[T, B, ...]``, and starts every run from rest (each layer's state emptied, which Sinabs re-creates as
zeros of the run's shape; ``sinabs.reset_states`` zeroes it in place, the same values). A Sinabs layer met
outside a ``SinabsNet`` is refused by name. Inside one, the torch modules of a Squeeze network run per step (as
in ``TimeDistributed``); the order of samples in the merged dim does not change them. In a batch-first network
``sinabs.layers.Repeat(module)`` runs ``module`` per step the same way.

Per step (``sinabs/layers/functional/lif.py`` ``lif_forward_single``), in Sinabs's order, from ``v = i = 0``::

    i = alpha_syn * (i + x)          with tau_syn           else   i = x
    u = (1 - alpha_mem) * i          norm_input=True        else   u = i
    v = alpha_mem * v + u            alpha_mem = exp(-1 / tau_mem) in float64 (LIF), the alpha itself with
                                     train_alphas, 1 for IAF; ExpLeak is LIF without spikes (norm_input False)
    s = [v - θ >= 0]                 SingleSpike  (float32 0/1)
    s = [v > 0] * trunc(v / θ)       MultiSpike   (an integer spike count, as float32); MaxSpike(n) clamps it at n
    v = v - s * θ                    MembraneSubtract (θ, or its subtract_value); s * θ is a float32 product
    v = v * [s == 0] + r             MembraneReset(reset_value=r): r is added to every neuron, as Sinabs adds it
    out = s                          (ExpLeak: out = v, before the clip)
    v = relu(v - min_v_mem) + min_v_mem                   with min_v_mem

SingleSpike without ``tau_syn`` or ``min_v_mem``, with a subtract reset of a float32-representable threshold
(Sinabs stores ``spike_threshold`` in float32 unless given a float64 tensor) or a reset to 0, is the built-in
``lif`` (``beta = alpha_mem``, ``alpha = 1 - alpha_mem`` with norm_input else 1, ``bias = 0``), which reaches every
target ``lif`` reaches: ``lif`` fires on the same ``v - θ >= 0``, and its ``U - θ S`` / ``U (1 - S)`` are then
Sinabs's ``v - s θ`` / ``v [s == 0] + 0`` exactly (up to the sign of a zero). The rest is ``lif_sinabs``.

The op repeats these torch expressions with the same dtypes, so a float64 run of the layer and of the op agree
bit for bit, spikes and counts alike (Sinabs's float32 spikes times the 0-dim threshold are a float32 product:
the kernel multiplies the same float32 spikes by the same 0-dim parameter). ``lif_sinabs`` params, all ``()``:
``alpha_mem``; ``alpha_syn``, ``threshold`` (absent for ExpLeak), ``min_v_mem``, ``subtract`` (a
``subtract_value``), ``reset_value`` (MembraneReset). Attrs ``spike`` ("single" | "multi" | "max" | "none"),
``max_spikes`` (int, "max"), ``reset`` ("subtract" | "reset" | "none"), ``norm_input``. Output kind: binary
(single), integer up to ``max_spikes`` (max), real (a MultiSpike count has no bound; ExpLeak's membrane). The
margin is the distance of ``v`` from the nearest boundary that changes the output (``θ``, or ``kθ`` for counts).

Refused: subclasses (the recurrent layers, ALIF), custom ``spike_fn`` / ``reset_fn``, non-scalar
``tau_mem`` / ``tau_syn`` / ``spike_threshold`` / ``min_v_mem``, a count threshold <= 0, and a Squeeze layer whose
``num_timesteps`` contradicts the run's T (``SinabsNet`` raises ``BadInput`` on the inputs). A Squeeze layer built
with ``batch_size`` (Sinabs's ``from_model(batch_size=...)``) runs at any batch: ``SinabsNet`` has it split
``[B*T]`` by T, the same split at its own batch size.
Checkpoints: Sinabs saves its state buffers (batch-shaped after a forward) in ``state_dict``. They are state, not
weights: ``SinabsNet.state_dict`` leaves them out, and loading into a ``SinabsNet`` keeps the network's own (empty)
state whatever shape the checkpoint's has; a checkpoint of the bare network (keys without ``net.``) loads too.
"""
import contextlib
import contextvars
import importlib.util
import sys
import types

import torch
import torch.nn.functional as F
from torch import nn

from spikec.ir.errors import BadInput
from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only
from spikec.frontend.registry import on_framework, refuse, register_converter
from spikec.ops import Param, define, register_kernel
from spikec.ops.neurons import LIF
from spikec.ops.registry import need

MERGED, BATCH_FIRST = "B*T", "B,T"        # the layouts SinabsNet feeds its network
SPIKES = ("single", "multi", "max", "none")
RESETS = ("subtract", "reset", "none")
_PARAMS = ("alpha_mem", "alpha_syn", "threshold", "min_v_mem", "subtract", "reset_value")
_LAYOUT: contextvars.ContextVar = contextvars.ContextVar("sinabs_layout", default=None)


# -- the adapter -----------------------------------------------------------------------------
class SinabsNet(nn.Module):
    """A Sinabs network run on spikec's ``[T, B, ...]``: ``net`` gets ``[B*T, ...]`` (``layout="B*T"``, a network of
    Squeeze layers) or ``[B, T, ...]`` (``"B,T"``); ``None`` picks ``"B*T"`` when ``net`` has a Squeeze layer. Each
    run starts from rest and leaves no state behind. ``net`` is converted as a module: an ``nn.Sequential`` (as
    Sinabs users write networks), a Sinabs layer, or any module with a registered converter."""

    def __init__(self, net: nn.Module, layout: str | None = None):
        super().__init__()
        self.net = net
        squeezed = [n for n, m in net.named_modules() if _is_squeeze(m)]
        self.layout = layout or (MERGED if squeezed else BATCH_FIRST)
        if self.layout not in (MERGED, BATCH_FIRST):
            raise BadInput(f"SinabsNet layout {self.layout!r} is not one of {MERGED!r}, {BATCH_FIRST!r}",
                           remedy="leave layout=None, or give one of those")

    def forward(self, x):
        steps, batch = x.shape[:2]
        squeezed = self._check_squeeze(steps)
        reset_states(self.net)
        y = x.transpose(0, 1)                       # [B, T, ...], Sinabs's layout
        with _split_by_steps(squeezed, steps):
            y = self.net(y.flatten(0, 1) if self.layout == MERGED else y)
        if self.layout == MERGED:
            y = y.unflatten(0, (batch, steps))
        reset_states(self.net)
        return y.transpose(0, 1)

    def _check_squeeze(self, steps) -> list:
        """The Squeeze layers; one built for another T is refused. A ``batch_size`` is only how a layer splits the
        batch-major ``[B*T]`` dim: each run splits it by ``T`` instead (``_split_by_steps``), which is the same
        split at the layer's own batch size, and per sample at any other (samples are independent), so the
        verification's own samples (probes, a data set's batch) need not match the batch it was trained with."""
        layers = []
        for name, m in self.net.named_modules():
            if not _is_squeeze(m):
                continue
            if m.num_timesteps not in (-1, steps):
                raise BadInput(f"{type(m).__name__} has num_timesteps={m.num_timesteps}; the inputs have T={steps}",
                               where=f"module {name!r}", remedy=f"give inputs of {m.num_timesteps} steps, or build "
                               "the Squeeze layers with num_timesteps=T (or batch_size=B: any T)")
            layers.append(m)
        return layers

    def state_dict(self, *args, **kwargs):
        """Without the layers' state buffers: state, not weights."""
        out = super().state_dict(*args, **kwargs)
        prefix = kwargs.get("prefix", args[1] if len(args) > 1 else "")
        for key in state_keys(self):
            out.pop(prefix + key, None)
        return out

    def _load_from_state_dict(self, state_dict, prefix, *args):
        """A bare network's keys get their ``net.`` prefix; every state buffer keeps its own value."""
        for key in [k for k in state_dict if k.startswith(prefix) and not k[len(prefix):].startswith("net.")]:
            state_dict[f"{prefix}net.{key[len(prefix):]}"] = state_dict.pop(key)
        for key in state_keys(self):
            state_dict[prefix + key] = self.get_buffer(key)
        super()._load_from_state_dict(state_dict, prefix, *args)


@contextlib.contextmanager
def _split_by_steps(layers: list, steps: int):
    """Each Squeeze layer splits ``[B*T]`` as ``(-1, steps)`` for one run, its own split restored after."""
    saved = [(m.batch_size, m.num_timesteps) for m in layers]
    try:
        for m in layers:
            m.batch_size, m.num_timesteps = -1, steps
        yield
    finally:
        for m, (b, t) in zip(layers, saved):
            m.batch_size, m.num_timesteps = b, t


def adapt(model: nn.Module) -> nn.Module:
    """``model`` as spikec runs it: a bare Sinabs network (one holding Sinabs layers and no ``SinabsNet``) wrapped
    in ``SinabsNet``, anything else as it is. Wrap before loading a checkpoint: the bare network's keys then load."""
    if not _stateful_layers(model) or any(isinstance(m, SinabsNet) for m in model.modules()):
        return model
    wrapped = SinabsNet(model)
    for name in DECLARED:   # what the network declares of its inputs stays declared (the driver reads the wrapper)
        if getattr(model, name, None) is not None:
            setattr(wrapped, name, getattr(model, name))
    return wrapped


DECLARED = ("input_shape", "steps")   # the attributes a model may declare its per-step shape and T with


def _is_squeeze(m) -> bool:
    return type(m).__module__.startswith("sinabs.") and hasattr(m, "squeeze_forward")


def _stateful_layers(model: nn.Module):
    if "sinabs" not in sys.modules:
        return []
    from sinabs.layers import StatefulLayer
    return [(n, m) for n, m in model.named_modules() if isinstance(m, StatefulLayer)]


def state_keys(model: nn.Module) -> set[str]:
    """The ``state_dict`` keys of ``model`` that are Sinabs state buffers (any batch shape), not weights."""
    return {f"{n}.{b}" if n else b for n, m in _stateful_layers(model) for b, _ in m.named_buffers(recurse=False)}


def reset_states(model: nn.Module) -> None:
    """Every Sinabs layer back to rest: its state buffers emptied (Sinabs re-creates them as zeros)."""
    for _, m in _stateful_layers(model):
        for b, buf in list(m.named_buffers(recurse=False)):
            m.register_buffer(b, torch.zeros(0, dtype=buf.dtype, device=buf.device))


def sinabs_net(ctx, m: SinabsNet, name, x):
    """The network in Sinabs's layout: its torch modules per step for a Squeeze network, its neurons multi-step."""
    if ctx.stepping != "multistep" or ctx.per_step:
        refuse(name, m, "SinabsNet maps a whole [T, B, ...] sequence, but here it sees one step or T*B merged",
               "call it on the model's [T, B, ...] input (--stepping multistep)")
    token, outer = _LAYOUT.set(m.layout), ctx.per_step
    ctx.per_step = m.layout == MERGED
    try:
        y = ctx.convert_module(m.net, f"{name}.net", x)
    finally:
        _LAYOUT.reset(token)
        ctx.per_step = outer
    if not isinstance(y, str):
        refuse(name, m, "the Sinabs network returns more than one tensor", "return one tensor from the network")
    return str(y)


def sinabs_repeat(ctx, m, name, x):
    """``sinabs.layers.Repeat(module)``: ``module`` per step on ``[B*T, ...]`` (its merged order does not matter
    to a per-step module), in a batch-first network."""
    if _LAYOUT.get() != BATCH_FIRST or ctx.per_step:
        refuse(name, m, "Repeat merges the [B, T] dims of a batch-first Sinabs network, but here it sees "
               + ("T*B merged" if ctx.per_step else "spikec's [T, B, ...] outside a SinabsNet"),
               "use Repeat in a SinabsNet of plain (not Squeeze) layers")
    ctx.per_step = True
    try:
        return ctx.convert_module(m.module, f"{name}.module", x)
    finally:
        ctx.per_step = False


# -- the neuron layers -----------------------------------------------------------------------
def sinabs_neuron(ctx, m, name, x):
    import sinabs.layers as sl
    exact = (sl.IAF, sl.IAFSqueeze, sl.LIF, sl.LIFSqueeze, sl.ExpLeak, sl.ExpLeakSqueeze)
    if type(m) not in exact:
        refuse(name, m, f"{type(m).__name__} is not one of {', '.join(c.__name__ for c in exact)} (a subclass, "
               "e.g. a recurrent layer, changes the step)", f"register a converter for {type(m).__qualname__} "
               "with spikec.frontend.register_converter")
    layout, want = _LAYOUT.get(), MERGED if _is_squeeze(m) else BATCH_FIRST
    if layout is None:
        refuse(name, m, "Sinabs layers take the batch first ([B, T, ...]; Squeeze layers [B*T, ...] batch-major), "
               "spikec's tensors are [T, B, ...] and its flatten(0, 1) is time-major",
               "compile spikec.frontend.sinabs.SinabsNet(net): it feeds the network Sinabs's layout from "
               "[T, B, ...] and starts each run from rest")
    if layout != want or ctx.stepping != "multistep" or ctx.per_step != (layout == MERGED):
        refuse(name, m, f"a {type(m).__name__} takes {'[B*T, ...]' if want == MERGED else '[B, T, ...]'}, but here "
               f"it sees {'[B*T, ...]' if ctx.per_step else '[B, T, ...]'}",
               f"use {'Squeeze' if layout == MERGED else 'plain'} layers throughout the network (SinabsNet "
               "layout " + repr(layout) + ")")
    attrs, params = _config(m, name)
    lif = _as_lif(attrs, params)
    if lif is not None:
        return ctx.emit(name, LIF, [x], *lif, scope=name)
    return ctx.emit(name, "lif_sinabs", [x], attrs, params, scope=name)


def _as_lif(attrs, params):
    """The built-in ``lif`` (``U = beta H + alpha X + bias``, fires on ``U - θ >= 0``) for the cases it computes
    identically: SingleSpike, no synaptic current, no ``min_v_mem``, and a subtract reset of a float32 threshold
    (Sinabs's float32 ``s * θ`` is then ``θ`` itself) or a reset to 0. Else None."""
    if attrs["spike"] != "single" or any(k in params and params[k] is not None
                                         for k in ("alpha_syn", "min_v_mem", "subtract")):
        return None
    theta, alpha = params["threshold"], params["alpha_mem"]
    if attrs["reset"] == "subtract" and float(theta.float()) != float(theta):
        return None
    if attrs["reset"] == "reset" and float(params["reset_value"]) != 0.0:
        return None
    gain = 1 - alpha if attrs["norm_input"] else torch.tensor(1.0, dtype=torch.float64)  # Sinabs's (1 - alpha)
    return ({"reset": "subtract" if attrs["reset"] == "subtract" else "zero"},
            {"beta": alpha, "alpha": gain, "bias": 0.0, "threshold": theta, "v_reset": 0.0})


def _config(m, name):
    from sinabs.activation import MaxSpike, MembraneReset, MembraneSubtract, MultiSpike, SingleSpike
    params = {"alpha_mem": _scalar(m, name, "alpha_mem" if m.train_alphas else "tau_mem", _alpha_mem(m)),
              "alpha_syn": None if m.alpha_syn_calculated is None else
              _scalar(m, name, "alpha_syn", m.alpha_syn_calculated.detach().double()),
              "min_v_mem": None if m.min_v_mem is None else _scalar(m, name, "min_v_mem", m.min_v_mem)}
    attrs = {"norm_input": bool(m.norm_input), "spike": "none", "reset": "none"}
    if m.spike_fn is None:
        return attrs, params
    fn, reset = m.spike_fn, m.reset_fn
    if fn is SingleSpike:
        attrs["spike"] = "single"
    elif fn is MultiSpike or (type(fn) is MaxSpike and fn.max_num_spikes_per_bin is None):
        attrs["spike"] = "multi"
    elif type(fn) is MaxSpike and isinstance(fn.max_num_spikes_per_bin, int) and fn.max_num_spikes_per_bin >= 1:
        attrs["spike"], attrs["max_spikes"] = "max", fn.max_num_spikes_per_bin
    else:
        refuse(name, m, f"spike_fn {fn!r} is not SingleSpike, MultiSpike or MaxSpike(n >= 1)",
               "use one of Sinabs's spike functions")
    params["threshold"] = _scalar(m, name, "spike_threshold", m.spike_threshold)
    if attrs["spike"] != "single" and not float(params["threshold"]) > 0:
        refuse(name, m, "a spike count needs a positive spike_threshold", "give spike_threshold > 0")
    if type(reset) is MembraneSubtract:
        attrs["reset"] = "subtract"
        if reset.subtract_value is not None:
            params["subtract"] = torch.tensor(float(reset.subtract_value), dtype=torch.float64)
    elif type(reset) is MembraneReset:
        attrs["reset"], params["reset_value"] = "reset", torch.tensor(float(reset.reset_value), dtype=torch.float64)
    else:
        refuse(name, m, f"reset_fn {reset!r} is not MembraneSubtract or MembraneReset", "use one of those")
    return attrs, params


def _alpha_mem(m):
    import sinabs.layers as sl
    if isinstance(m, sl.IAF):
        return torch.tensor(1.0, dtype=torch.float64)
    # as a float64 run computes it: exp(-1 / tau_mem) of the float64 tau, or the trained alpha itself
    return m.alpha_mem.detach().double() if m.train_alphas else torch.exp(-1.0 / m.tau_mem.detach().double())


def _scalar(m, name, what, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.is_floating_point():
        refuse(name, m, f"{what} has shape {tuple(getattr(value, 'shape', ()))}; spikec takes one real number",
               f"give {what} as one number")
    return value.detach().double().reshape(())


# -- the framework-exact op -------------------------------------------------------------------
def infer_lif_sinabs(node, ins):
    (t,) = ins
    a, p = node.attrs, node.params
    for n in _PARAMS:
        if n in p:
            need(p[n].shape == (), node, f"parameter {n} has shape {p[n].shape}; expected ()")
    need(a.get("spike") in SPIKES, node, f"attr spike must be one of {SPIKES}, got {a.get('spike')!r}")
    need(a.get("reset") in RESETS, node, f"attr reset must be one of {RESETS}, got {a.get('reset')!r}")
    need(isinstance(a.get("norm_input"), bool), node, "attr norm_input must be a bool")
    spiking = a["spike"] != "none"
    need(spiking == ("threshold" in p) and spiking == (a["reset"] != "none"), node,
         "a spiking lif_sinabs has a threshold and a reset, ExpLeak (spike 'none') neither")
    need((a["reset"] == "reset") == ("reset_value" in p), node, "reset 'reset' takes parameter reset_value")
    need(a["reset"] == "subtract" or "subtract" not in p, node, "parameter subtract goes with reset 'subtract'")
    if a["spike"] == "max":
        n = a.get("max_spikes")
        need(isinstance(n, int) and not isinstance(n, bool) and n >= 1, node, "max_spikes must be an int >= 1")
        return TensorType(t.shape, "integer", n)
    return TensorType(t.shape, "binary") if a["spike"] == "single" else TensorType(t.shape)


def _fire(attrs, v, theta):
    """Sinabs's spike_fn forward: float32 spikes or counts."""
    if attrs["spike"] == "single":
        return (v - theta >= 0).float()
    s = (v > 0) * torch.div(v, theta, rounding_mode="trunc").float()
    return torch.clamp(s, max=attrs["max_spikes"]) if attrs["spike"] == "max" else s


def _margin(attrs, v, theta):
    if attrs["spike"] == "single":
        return (v - theta).abs()
    k = torch.round(v / theta).clamp(min=1, max=attrs.get("max_spikes"))
    return (v - k * theta).abs()


def lif_sinabs_kernel(node, p, x):
    """Sinabs's ``lif_forward_single`` step by step, in its order and dtypes."""
    float_only(node, x)
    a = node.attrs
    alpha, alpha_syn, theta, vmin = p["alpha_mem"], p.get("alpha_syn"), p.get("threshold"), p.get("min_v_mem")
    v, i = torch.zeros_like(x[0]), torch.zeros_like(x[0])
    outs, margins = [], []
    for x_t in x:
        i = alpha_syn * (i + x_t) if alpha_syn is not None else x_t
        v = alpha * v + ((1 - alpha) * i if a["norm_input"] else i)
        if a["spike"] == "none":
            out = v.clone()
        else:
            out = _fire(a, v, theta)
            margins.append(_margin(a, v, theta))
            if a["reset"] == "subtract":
                v = v - out * (p["subtract"] if "subtract" in p else theta)
            else:
                v = v * (out == 0).float() + p["reset_value"]
        if vmin is not None:
            v = F.relu(v - vmin) + vmin
        outs.append(out.to(x.dtype))
    return (torch.stack(outs), torch.stack(margins)) if margins else torch.stack(outs)


define("lif_sinabs", 1, infer_lif_sinabs, stateful=True, neuron=True, state=("v", "i"), threshold_margin=True,
       doc="Sinabs IAF / LIF / ExpLeak (and Squeeze forms) in Sinabs's order and dtypes",
       params=(Param("alpha_mem", "()", "membrane decay: exp(-1 / tau_mem), the trained alpha, 1 for IAF"),
               Param("alpha_syn", "()", "synaptic decay exp(-1 / tau_syn) (absent: no synaptic current)", False),
               Param("threshold", "()", "spike_threshold (absent for ExpLeak, which does not spike)", False),
               Param("min_v_mem", "()", "lower bound of v, clipped after the reset", False),
               Param("subtract", "()", "MembraneSubtract's subtract_value (absent: the threshold)", False),
               Param("reset_value", "()", "MembraneReset's reset_value, added to every neuron", False)))
register_kernel("lif_sinabs", lif_sinabs_kernel)


# -- registration, only where the package imports -----------------------------------------
def _stub_pylab():
    """Sinabs imports pylab (matplotlib) at package import only to plot: without it, a stub whose every attribute
    says so, so the layers import."""
    if "pylab" in sys.modules or importlib.util.find_spec("pylab") is not None:
        return

    def missing(attr):
        raise AttributeError(f"pylab.{attr}: matplotlib is not installed (spikec stubbed pylab so that Sinabs "
                             "imports)")
    stub = types.ModuleType("pylab", "stub: matplotlib is not installed")
    stub.__getattr__ = missing
    sys.modules["pylab"] = stub


register_converter(SinabsNet, sinabs_net)


def sum_pool(ctx, m, name, x):
    """Sinabs's ``SumPool2d`` (Speck's pooling: ``torch.nn.LPPool2d`` with p = 1, a window sum) as torch computes
    it: ``F.lp_pool2d`` is ``avg_pool2d(x ** 1)`` times ``kh * kw`` (``sign(y) * relu(|y|)`` and ``** 1.0`` leave a
    finite ``y`` as it is), so an average pool then a scale by the window's size, bit for bit."""
    if float(m.norm_type) != 1.0:
        refuse(name, m, f"an LPPool2d of norm {m.norm_type} (Sinabs's SumPool2d has 1)", "use SumPool2d")
    kernel = tuple(m.kernel_size) if isinstance(m.kernel_size, (tuple, list)) else (m.kernel_size,) * 2
    stride = m.stride if m.stride is not None else kernel
    stride = tuple(stride) if isinstance(stride, (tuple, list)) else (stride,) * 2
    attrs = {"kernel": kernel, "stride": stride, "padding": (0, 0), "ceil_mode": bool(m.ceil_mode),
             "count_include_pad": True}
    mean = ctx.emit(f"{name}.mean", "avgpool2d", [x], attrs, scope=name)
    return ctx.emit(name, "scale", [mean], {"a": float(kernel[0] * kernel[1]), "b": 0.0}, scope=name)
if importlib.util.find_spec("sinabs") is not None:  # the stub only where Sinabs is there to need it, before the
    with contextlib.suppress(ImportError):          # model's code imports Sinabs
        _stub_pylab()


@on_framework("sinabs")  # imported only for a model whose code imported it
def _register():
    with contextlib.suppress(ImportError):
        import sinabs.layers as _sl
        for _cls in (_sl.IAF, _sl.IAFSqueeze, _sl.LIF, _sl.LIFSqueeze, _sl.ExpLeak, _sl.ExpLeakSqueeze):
            register_converter(_cls, sinabs_neuron)
        register_converter(_sl.Repeat, sinabs_repeat)
        register_converter(_sl.SumPool2d, sum_pool)
    with contextlib.suppress(ImportError):
        from sinabs.network import Network as _Network
        register_converter(_Network, sinabs_network)


def sinabs_network(ctx, m, name, x):
    """``sinabs.from_model``'s ``Network``: its forward is its ``spiking_model``'s (the analog model is not run)."""
    return ctx.convert_module(m.spiking_model, f"{name}.spiking_model", x)
