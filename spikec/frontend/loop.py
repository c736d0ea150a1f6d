"""``--stepping loop``: a ``forward`` that runs its own time loop, captured by execution and folded.

snnTorch's tutorials write ``for step in range(num_steps): spk, mem = self.lif(self.fc(x), mem)`` and return
``torch.stack(spk_rec)``; others loop ``range(x.shape[0])`` over ``x[step]``. spikec runs ``forward`` once on the
concrete inputs under torch.fx, every shape read a concrete number and every module with a converter an opaque
call, so the loop unrolls into T copies of one step. The fold takes them back to one step:

* a module called more than once is at step k on its k-th call; ``x[k]`` of the input is at step k; any other
  node is at the latest step of its inputs, or at none (computed from constants and a static input);
* every step holds the same nodes in the same order as step 0, reading the same step (or a time-free node),
  and a neuron's extra arguments (its state) are at step k the outputs of its call at step k - 1, at step 0
  a reset state (None, an empty tensor or zeros);
* each output is ``torch.stack`` over the steps of one step-0 node.

Step 0 is then converted as one step of a multi-step graph (``ConvertContext.stepping = "step"``). The fold is
a claim like any pass: the driver proves the folded graph against the model's own forward on every input.

A ``forward`` with no loop that makes its time steps from its one static input first thing
(``x.unsqueeze(0).repeat(self.T, 1, 1, 1, 1)``, SpikingJelly's CSNN tutorial: ``repeated_body``) is a static loop
model too: its fx graph with the repeat taken out is the multi-step graph it runs on the repeated input, converted
as it is (``Looped.multistep``), and the model itself is run on the static input and proved against it.
"""
import operator

import torch
import torch.fx
from torch import nn

from spikec.ir.errors import SpikecError, UnsupportedOp
from spikec.frontend.stepping import reset_state
from spikec.frontend.loop_buffer import as_stacked, step_index

WHERE = "model forward (--stepping loop)"
MULTISTEP = "spikec_multistep"  # fx node meta: computed before the loop on the whole [T, B, ...] input


class Looped(nn.Module):
    """A model running its own time loop, taking ``[T, B, ...]`` (``static``: ``[B, ...]``, here ``x[0]``).
    ``multistep`` (set by ``bind_repeated``): ``body`` is a multi-step graph of ``root``, not one step."""

    def __init__(self, model: nn.Module, static: bool = False):
        super().__init__()
        self.model, self.static = model, static

    def forward(self, x: torch.Tensor):
        reset_state(self.model)
        try:
            return self.model(x[0] if self.static else x)
        finally:
            reset_state(self.model)


class _Concrete(torch.fx.Proxy):
    """A proxy that knows the value it stands for: shapes, lengths and iteration are concrete numbers."""

    def _value(self):
        return self.node.meta.get("value")

    def __getattr__(self, k):
        v = self.node.meta.get("value") if "node" in self.__dict__ else None
        if isinstance(v, torch.Tensor) and k in ("shape", "ndim", "dtype", "device", "size", "dim", "numel"):
            return getattr(v, k)
        return super().__getattr__(k)

    def __len__(self):
        v = self._value()
        if isinstance(v, (tuple, list, torch.Tensor)):
            return len(v)
        return super().__len__()

    def __iter__(self):
        v = self._value()
        if isinstance(v, (tuple, list, torch.Tensor)):
            return iter([self[i] for i in range(len(v))])
        return super().__iter__()


def _value_of(a):
    return torch.fx.node.map_aggregate(a, lambda v: v.node.meta["value"] if isinstance(v, torch.fx.Proxy) else v)


def concrete_trace(model: nn.Module, example: torch.Tensor, leaf) -> torch.fx.Graph:
    """fx-trace ``model`` on ``example``, running every node for real (``leaf(module)``: keep it opaque)."""

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return type(m) is not nn.Sequential and (leaf(m) or super().is_leaf_module(m, qualname))

        def proxy(self, node):
            return _Concrete(node, self)

        def call_module(self, m, forward, args, kwargs):
            if self.computing:  # a module run for its value: plain torch, nothing recorded
                return forward(*args, **kwargs)
            return super().call_module(m, forward, args, kwargs)

        def getattr(self, attr, attr_val, parameter_proxy_cache):
            return attr_val if self.computing else super().getattr(attr, attr_val, parameter_proxy_cache)

        def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
            p = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
            self.computing = True
            try:
                p.node.meta["value"] = self._run(kind, target, p.node.args, _value_of(args), _value_of(kwargs))
            finally:
                self.computing = False
            return p

        def _run(self, kind, target, node_args, vargs, vkwargs):
            if kind == "placeholder":
                value = example if not self.bound else (node_args[0] if node_args else None)
                self.bound = True
                return value
            if kind == "call_function":
                return target(*vargs, **vkwargs)
            if kind == "call_method":
                return getattr(vargs[0], target)(*vargs[1:], **vkwargs)
            if kind == "call_module":
                return self.root.get_submodule(target)(*vargs, **vkwargs)
            if kind == "get_attr":
                return operator.attrgetter(target)(self.root)
            return None

    tracer = Tracer()
    tracer.bound, tracer.computing = False, False
    reset_state(model)
    try:
        with torch.no_grad():
            return tracer.trace(model)
    except SpikecError:
        raise
    except Exception as e:
        raise UnsupportedOp(f"the time loop could not be captured: {type(e).__name__}: {e}", where=WHERE,
                            remedy="loop over range(num_steps) or range(x.shape[0]) with control flow that does not "
                                   "depend on tensor values; keep such logic inside a module with a converter") from None
    finally:
        reset_state(model)


def steps_of(graph: torch.fx.Graph, placeholder) -> dict:
    """Each node's time step (None: time-free), as the module docstring defines it."""
    step, calls = {}, {}
    counts = {}
    for n in graph.nodes:
        if n.op == "call_module":
            counts[n.target] = counts.get(n.target, 0) + 1
    derived = input_derived(graph, placeholder)
    for n in graph.nodes:
        ins = [step.get(a) for a in n.all_input_nodes if step.get(a) is not None]
        s = max(ins) if ins else None
        if _is_step_read(n, derived):
            s = step_index(n.args[1])
        elif n.op == "call_module" and counts[n.target] > 1:
            k = calls[n.target] = calls.get(n.target, -1) + 1
            s = max(k, s if s is not None else k)
        step[n] = s
    return step


def input_derived(graph: torch.fx.Graph, placeholder) -> set:
    """The input and what forward computes from it alone before any step is read: ``[T, B, ...]`` tensors
    (``conv(x.flatten(0, 1)).unflatten(0, (T, B))``), whose ``[step]`` a loop may read as it reads ``x[step]``."""
    derived = {placeholder}
    for n in graph.nodes:
        ins = n.all_input_nodes
        if ins and all(a in derived for a in ins) and not _is_step_read(n, derived) and n.op != "output":
            derived.add(n)
    return derived


def _is_step_read(n, derived) -> bool:
    return n.op == "call_function" and n.target is operator.getitem and n.args[0] in derived \
        and step_index(n.args[1]) is not None


def _first_input_root(a):
    while isinstance(a, torch.fx.Node) and a.op == "call_function" and a.target is operator.getitem:
        a = a.args[0]
    return a


def _is_reset_state(a) -> bool:
    if a is None:
        return True
    v = a.node.meta.get("value") if isinstance(a, torch.fx.Proxy) else \
        a.meta.get("value") if isinstance(a, torch.fx.Node) else a
    if isinstance(a, torch.fx.Node) and a.op == "get_attr" and v is None:
        return True
    if isinstance(v, (tuple, list)):
        return all(_is_reset_state(x) for x in v)
    return isinstance(v, torch.Tensor) and (v.numel() == 0 or not bool(v.any()))


def _refuse(why: str, remedy: str):
    raise UnsupportedOp(why, where=WHERE, remedy=remedy)


def _over_time(it):
    """``(stack, reduction)`` for ``torch.stack(record).sum(0)`` / ``.mean(0)`` (method or ``torch.sum`` /
    ``torch.mean``, dim 0 positional or ``dim=0``): a read-out over time of the record; else ``(it, None)``."""
    if not isinstance(it, torch.fx.Node) or not (
            (it.op == "call_method" and it.target in ("sum", "mean"))
            or (it.op == "call_function" and it.target in (torch.sum, torch.mean))):
        return it, None
    dim = it.args[1] if len(it.args) > 1 else it.kwargs.get("dim")
    source = it.args[0] if it.args else None
    if dim not in (0, (0,), [0]) or it.kwargs.get("keepdim") or not isinstance(source, torch.fx.Node) \
            or source.target is not torch.stack:
        _refuse(f"output {it.name!r} reduces {getattr(source, 'name', source)!r} over dim {dim}",
                "reduce the stacked record over time only: torch.stack(record).sum(0) or .mean(0)")
    return source, it


def _decodes_a_record(it) -> bool:
    """An output that is a tensor constant of a graph where a constant is written step by step (``__setitem__``):
    the concrete trace folded the decoding of a preallocated record (its reads were of a plain tensor)."""
    if not (isinstance(it, torch.fx.Node) and it.op == "get_attr"):
        return False
    return any(n.op == "call_method" and n.target == "__setitem__" and n.args and getattr(n.args[0], "op", None)
               == "get_attr" and n.args[0].target != it.target for n in it.graph.nodes)


def _stacked_outputs(result) -> list[list]:
    """The per-step nodes each output stacks: ``torch.stack(record)`` or ``torch.stack(record, dim=0)``, optionally
    read out over time (``.sum(0)`` / ``.mean(0)``; ``_Fold.reductions``)."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    seqs = []
    for it in items:
        it, _ = _over_time(it)
        if not (isinstance(it, torch.fx.Node) and it.op == "call_function" and it.target is torch.stack):
            if _decodes_a_record(it):
                _refuse("forward computes its output from a record preallocated with torch.zeros(T, B, ...) and "
                        "filled in the loop (Norse's ConvNet tutorial, then its decoder): such a record is captured "
                        "only when forward returns it as it is", "return the record itself and decode outside the "
                        "model (compile the network, e.g. Norse's ConvNet without its max/log_softmax decoder), or "
                        "append each step's output to a list and decode torch.stack(record)")
            _refuse(f"forward returns {getattr(it, 'name', type(it).__name__)!r}, not a record stacked over the "
                    "loop's steps", "append each step's output to a list and return torch.stack(record) (one per "
                    "output); a forward that returns one step is --stepping step")
        dim = it.args[1] if len(it.args) > 1 else it.kwargs.get("dim", 0)
        if dim != 0 or not isinstance(it.args[0], (tuple, list)) or not it.args[0]:
            _refuse(f"output {it.name!r} stacks along dim {dim}", "stack the record along dim 0: [T, B, ...]")
        seqs.append(list(it.args[0]))
    if len({len(s) for s in seqs}) != 1:
        _refuse(f"outputs record different numbers of steps {[len(s) for s in seqs]}", "record every step of every output")
    return seqs


class _Fold:
    """One unrolled capture and its steps; ``check`` proves the steps alike, ``body`` builds step 0."""

    def __init__(self, root: nn.Module, graph: torch.fx.Graph):
        self.root, self.graph = root, graph
        self.ph = next(n for n in graph.nodes if n.op == "placeholder")
        self.step = steps_of(graph, self.ph)
        self.derived = input_derived(graph, self.ph)
        out = next(n for n in graph.nodes if n.op == "output")
        self.seqs = _stacked_outputs(out.args[0])
        results = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
        self.reductions = [_over_time(it)[1] for it in results]  # per output: its .sum(0) / .mean(0), or None
        self.steps = len(self.seqs[0])
        self.indexed = any(self._reads_step(n) is not None for n in graph.nodes)
        after = {n for n in graph.nodes if n.op == "call_function" and n.target is torch.stack} | {out} \
            | {r for r in self.reductions if r is not None}
        self.by_step = [[n for n in graph.nodes if self.step[n] == t and n not in after] for t in range(self.steps)]
        self.pos = {n: i for nodes in self.by_step for i, n in enumerate(nodes)}
        for seq in self.seqs:
            for t, n in enumerate(seq):
                if self.step.get(n) != t:
                    _refuse(f"the record's entry {t} ({n.name!r}) is computed at step {self.step.get(n)}",
                            "append exactly one value per step, in step order")

    def _reads_step(self, n):
        """``k`` for ``v[k]`` of the input or of a ``[T, B, ...]`` tensor computed from it alone; else None."""
        return step_index(n.args[1]) if _is_step_read(n, self.derived) else None

    def _canon(self, a, t):
        """What ``a`` read at step ``t`` is, relative to that step."""
        if isinstance(a, torch.fx.Node):
            s = self.step.get(a)
            if s is None:
                if a is self.ph:
                    return ("input",)
                return ("free", a.op, str(a.target), self._canon(a.args, None), self._canon(a.kwargs, None))
            if s == t:
                return ("now", self.pos[a])
            if t is not None and s == t - 1:
                return ("prev", self.pos[a])
            _refuse(f"node {a.name!r} of step {s} is read at step {t}", "read only the current step and the state "
                    "a neuron returned at the step before")
        if isinstance(a, (tuple, list)):
            return tuple(self._canon(x, t) for x in a)
        if isinstance(a, dict):
            return tuple((k, self._canon(v, t)) for k, v in sorted(a.items()))
        if isinstance(a, torch.Tensor):
            return ("tensor", tuple(a.shape), a.detach().double().sum().item())
        return ("const", repr(a))

    def check(self):
        zero = self.by_step[0]
        for t in range(1, self.steps):
            nodes = self.by_step[t]
            if len(nodes) != len(zero):
                _refuse(f"step {t} computes {len(nodes)} nodes, step 0 computes {len(zero)}",
                        "make every step of the loop compute the same thing (no step-dependent branches)")
            for n0, n in zip(zero, nodes):
                self._check_pair(n0, n, t)

    def _check_pair(self, n0, n, t):
        same_read = self._reads_step(n0) == 0 and self._reads_step(n) == t
        if (n0.op, n0.target) != (n.op, n.target) or (not same_read and len(n0.args) != len(n.args)):
            _refuse(f"step {t} computes {n.name!r} ({n.op} {n.target}) where step 0 computes {n0.name!r} "
                    f"({n0.op} {n0.target})", "make every step of the loop compute the same thing; a hand-written "
                    "neuron whose state is a plain tensor carried from step to step (mem = torch.zeros(...) before "
                    "the loop, then mem = beta * mem + x) computes differently at step 0 and is no neuron module "
                    "spikec can fold: write the neuron as a module (snn.Leaky, spikec.nn.LIF) or register a "
                    "converter for your own module (spikec.frontend.register_converter)")
        if same_read:
            return
        for i, (a0, a) in enumerate(zip(n0.args, n.args)):
            c = self._canon(a, t)
            if "prev" in repr(c):
                if n.op != "call_module" or i == 0:
                    _refuse(f"{n.name!r} reads the previous step outside a neuron's state",
                            "carry state between steps only through neuron modules")
                self._check_state(n0, a0, n, a, t)
            elif n.op == "call_module" and i and isinstance(c, tuple) and c and c[0] in ("free", "const", "tensor"):
                _refuse(f"the state passed to {n.target!r} at step {t} is not what it returned at step {t - 1} "
                        "(it is passed anew each step, so the neuron would restart)",
                        f"pass {n.target!r} the state its previous call returned")
            elif c != self._canon(a0, 0):
                for x in [n, *_flat(a)]:
                    _refuse_time_elsewhere(self.ph, x, t)
                _refuse(f"argument {i} of {n.name!r} at step {t} differs from step 0 ({n0.name!r})",
                        "make every step of the loop compute the same thing")

    def _check_state(self, n0, a0, n, a, t):
        roots = {_first_input_root(x) for x in _flat(a)}
        prev = self.by_step[t - 1][self.pos[n]] if t - 1 >= 0 else None
        if roots != {prev} or prev.target != n.target:
            _refuse(f"the state passed to {n.target!r} at step {t} is not what it returned at step {t - 1}",
                    f"pass {n.target!r} the state its previous call returned")
        if not all(_is_reset_state(self._resolve(x)) for x in _flat(a0)):
            _refuse(f"the state passed to {n.target!r} at step 0 is not its reset state",
                    "start from the module's reset state (init_leaky()/init_synaptic(), None, or zeros)")

    def _resolve(self, a):
        if isinstance(a, torch.fx.Node) and a.op == "get_attr" and "value" not in a.meta:
            return operator.attrgetter(a.target)(self.root)
        return a

    def state_args(self, n0) -> set[int]:
        """The argument positions of a step-0 module call that carry state (read the previous step at step 1)."""
        if self.steps < 2:
            return set(range(1, len(n0.args)))
        n1 = self.by_step[1][self.pos[n0]]
        return {i for i, a in enumerate(n1.args) if i and "prev" in repr(self._canon(a, 1))}


def _refuse_time_elsewhere(ph, n, t):
    """A step read other than ``x[step]`` of the input: batch-first ``x[:, step]``, or a tensor computed from
    the input before the loop and indexed per step."""
    if n.op != "call_function" or n.target is not operator.getitem:
        return
    source, index = n.args
    if source is ph and isinstance(index, tuple) and t in index:
        _refuse(f"{n.name!r} reads step {t} along dim {index.index(t)} of the input ({index!r}): spikec takes "
                "time first, [T, B, ...]", "lay the inputs out [T, B, ...] and index x[step] (transpose a batch-first "
                "array with x.transpose(0, 1) before saving it)")
    if isinstance(source, torch.fx.Node) and index == t:
        _refuse(f"{n.name!r} reads step {t} of {source.name!r}, which forward computes from the input before the "
                "loop", "compute the per-step layers inside the loop, on x[step]; or, for a forward that maps "
                "[T, B, ...] to [T, B, ...] without a loop, use --stepping multistep")


def _flat(a):
    if isinstance(a, (tuple, list)):
        return [y for x in a for y in _flat(x)]
    return [a] if isinstance(a, torch.fx.Node) else []


def _body(fold: _Fold) -> torch.fx.Graph:
    """Step 0 as a graph of one step: the per-step input (``x[0]``, or the static input) its placeholder,
    each module's state arguments dropped (the multi-step op carries the state)."""
    body, env = torch.fx.Graph(), {}
    x = body.placeholder("x")
    env[fold.ph] = x
    zero = set(fold.by_step[0])
    needed = _needed(fold, [n for seq in fold.seqs for n in seq[:1]])
    for n in fold.graph.nodes:
        if n not in needed or n is fold.ph:
            continue
        if fold._reads_step(n) == 0:  # x[0], or v[0] of a [T, B, ...] tensor v: one step of it
            env[n] = env[n.args[0]]
            continue
        if fold.indexed and n in fold.derived:  # computed from the whole input: converted as multi-step
            env[n] = body.node_copy(n, lambda v: env[v])
            env[n].meta[MULTISTEP] = True
            continue
        whole = [a.name for a in n.all_input_nodes if fold.indexed and a in fold.derived]
        if whole:
            _refuse(f"{n.name!r} reads the whole of {whole[0]!r} ([T, B, ...]), not one step of it",
                    f"read one step at a time: {whole[0]}[step]")
        if n.op == "call_module" and n in zero:
            if n.kwargs:
                _refuse(f"module {n.target!r} is called with keyword arguments", "pass its arguments positionally")
            drop = fold.state_args(n)
            for i in drop:
                if not all(_is_reset_state(fold._resolve(a)) for a in _flat(n.args[i])):
                    _refuse(f"the state passed to {n.target!r} at step 0 is not its reset state",
                            "start from the module's reset state (init_leaky()/init_synaptic(), None, or zeros)")
            args = tuple(torch.fx.node.map_arg(a, lambda v: env[v]) for i, a in enumerate(n.args) if i not in drop)
            env[n] = body.call_module(n.target, args)
        else:
            env[n] = body.node_copy(n, lambda v: env[v])
    outs = [env[seq[0]] for seq in fold.seqs]
    for i, r in enumerate(fold.reductions):  # the read-out over time of the whole record: converted multi-step
        if r is not None:
            outs[i] = body.node_copy(r, lambda v, seq=outs[i]: seq)
            outs[i].meta[MULTISTEP] = True
    body.output(outs[0] if len(outs) == 1 else tuple(outs))
    return body


def _needed(fold: _Fold, roots) -> set:
    """The nodes the step-0 outputs depend on, not crossing into the steps before (state) or the input."""
    seen, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        drop = fold.state_args(n) if n.op == "call_module" and fold.step.get(n) == 0 else set()
        for i, a in enumerate(n.args):
            if i not in drop:
                todo += _flat(a)
        todo += _flat(list(n.kwargs.values()))
    return seen


def capture(model: nn.Module, example: torch.Tensor, leaf) -> tuple[torch.fx.Graph, bool, int]:
    """``(one-step body, static input?, number of steps)`` of ``model``'s loop run on ``example``."""
    graph = as_stacked(model, concrete_trace(model, example, leaf))   # a record written into a preallocated tensor
    fold = _Fold(model, graph)
    fold.check()
    return _body(fold), not fold.indexed, fold.steps


def _unsqueezes_time(n, x) -> bool:
    """``x.unsqueeze(0)``, ``torch.unsqueeze(x, 0)`` or ``x[None]`` / ``x[None, ...]``: a new leading dim on ``x``."""
    if n.op == "call_method" and n.target == "unsqueeze" or n.op == "call_function" and n.target is torch.unsqueeze:
        dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
        return n.args[0] is x and dim == 0
    if n.op == "call_function" and n.target is operator.getitem and n.args[0] is x:
        index = n.args[1] if isinstance(n.args[1], tuple) else (n.args[1],)
        return index[:1] == (None,) and all(i is Ellipsis or i == slice(None) for i in index[1:])
    return False


def _repeat_count(n, u) -> int | None:
    """T of ``u.repeat(T, 1, ..., 1)`` or ``u.expand(T, -1, ..., -1)`` (sizes as arguments or one tuple); else None."""
    if n.op != "call_method" or n.target not in ("repeat", "expand") or n.args[:1] != (u,) or n.kwargs:
        return None
    sizes = n.args[1] if len(n.args) == 2 and isinstance(n.args[1], (tuple, list)) else n.args[1:]
    rest = 1 if n.target == "repeat" else -1
    if not sizes or not all(type(v) is int for v in sizes) or any(v != rest for v in sizes[1:]) or sizes[0] < 1:
        return None
    return sizes[0]


def repeated_body(model: nn.Module, fx_trace) -> tuple[nn.Module, torch.fx.Graph, int] | None:
    """``(root, graph, T)`` for a ``forward`` that makes its time steps by repeating its one static input over T
    (``x_seq = x.unsqueeze(0).repeat(T, 1, 1, 1, 1)``, SpikingJelly's CSNN tutorial; ``.expand(T, -1, ...)``,
    ``x[None]``): its fx graph with the repeat taken out, so that its input stands for the repeated ``[T, B, ...]``
    and the rest is the multi-step graph it is; None for any other forward. ``fx_trace``: the frontend's tracer
    (``tracing.fx_trace``, which imports this module), ``(root, graph)`` of a model."""
    try:
        root, graph = fx_trace(model)
    except SpikecError:
        return None
    finally:
        reset_state(model)
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    if len(inputs) != 1 or len(inputs[0].users) != 1:
        return None
    x, (u,) = inputs[0], inputs[0].users
    if not _unsqueezes_time(u, x) or len(u.users) != 1:
        return None
    (r,) = u.users
    steps = _repeat_count(r, u)
    if steps is None:
        return None
    r.replace_all_uses_with(x)
    graph.erase_node(r)
    graph.erase_node(u)
    return root, graph, steps


def bind_repeated(model: nn.Module, example: torch.Tensor, fx_trace) -> tuple["Looped", torch.Tensor] | None:
    """The adapter for a model that repeats its static input ``example`` (``[B, ...]``) over T itself
    (``repeated_body``), and that input repeated as the ``[T, B, ...]`` it stands for; None for any other model.
    The adapter runs the model itself on ``x[0]``, as a static loop model is run; it is traced as its multi-step
    graph."""
    found = repeated_body(model, fx_trace)
    if found is None:
        return None
    root, body, steps = found
    looped = Looped(model, static=True)
    looped.body, looped.root, looped.multistep = body, root, True
    looped.lead = (steps, example.shape[0])
    return looped, example.unsqueeze(0).expand(steps, *example.shape).contiguous()


def bind(model: nn.Module, example, leaf) -> tuple["Looped", torch.Tensor]:
    """The adapter for ``model`` and the ``[T, B, ...]`` input it takes, from ``example`` as the model takes it."""
    body, static, steps = capture(model, example, leaf)
    looped = Looped(model, static)
    looped.body = body
    looped.lead = (steps, example.shape[0] if static else example.shape[1])  # shapes in the body are numbers
    x = example.unsqueeze(0).expand(steps, *example.shape).contiguous() if static else example
    if not static and steps != example.shape[0]:
        _refuse(f"the loop runs {steps} steps over an input of {example.shape[0]} steps",
                "loop over range(x.shape[0]), or give inputs of as many steps as the loop runs")
    return looped, x
