"""What a captured call's lowering sees: IR values behind their lead dims, the lowering state, the user's line."""
import operator
import re
from dataclasses import dataclass

from spikec.ir.errors import UnsupportedOp


@dataclass(frozen=True)
class Value:
    """An IR value as the captured graph sees it: node ``name`` behind the leading dims ``lead``. ``folded`` > 0:
    torch sees the lead dims and the first ``folded`` per-step dims merged into its first dim (the view ATen makes
    of ``F.linear`` / ``x @ W`` on more than two dims, ``[T*B*N, D]``), which only a product and the view back
    read (``table.FOLDS``)."""
    name: str
    lead: tuple
    folded: int = 0


class Unavailable:
    """A result spikec computes no tensor for (max pooling's indices, batch norm's saved statistics)."""

    def __init__(self, what):
        self.what = what


@dataclass(frozen=True)
class Lowering:
    """One captured call being lowered: the trace's context, where its nodes go and the lead sizes used."""
    ctx: object
    base: str            # node names are "<base>.<aten node>"
    scope: str
    sizes: dict          # LeadDim -> its example size
    call: "Call"         # the user's call (for messages)
    single: bool = False      # the call is one ATen op: its nodes are named like the call itself
    aten_node: object = None  # the ATen node being lowered (one Lowering per node: dataclasses.replace)

    def emit(self, op, inputs, attrs=None, params=None) -> str:
        name = self.base if self.single else f"{self.base}.{self.aten_node.name}"
        return self.ctx.emit(name, op, [v.name for v in inputs], attrs, params, scope=self.scope)

    def shape(self, v: Value) -> tuple:
        return self.ctx.type(v.name).shape

    def refuse(self, what, remedy):
        op = f" -> {_op_name(self.aten_node.target)}" if self.aten_node is not None else ""
        raise UnsupportedOp(f"{self.call.what}{op}: {what}", where=where(self.call), remedy=remedy)

    def dim(self, v: Value, d: int, remedy: str = "") -> int:
        """Per-step index of torch dim ``d`` of ``v``; a lead dim (T or B) is refused (``remedy`` first)."""
        nd = len(v.lead) + len(self.shape(v))
        d = d % nd
        if d < len(v.lead):
            meaning = {"T": "time", "B": "batch", "T*B": "merged time and batch"}[repr(v.lead[d])]
            self.refuse(f"works along dim {d}, the {meaning} dim {v.lead[d]!r}",
                        remedy + "apply it to the per-step dims only (count them after the leading [T, B] or "
                        "[T*B]); a forward that indexes x[step] in its own loop is --stepping loop")
        return d - len(v.lead)


def _op_name(target) -> str:
    return f"aten.{target.name().split('::')[-1]}" if hasattr(target, "name") else str(target)


@dataclass(frozen=True)
class Call:
    """The user's call being captured, as messages name it: an fx node, or a module a converter calls."""
    op: str                  # call_function | call_method | call_module
    target: object
    name: str                # the fx node's name (or the module path)
    stack_trace: str | None  # where the user's code made it (fx records it), None when unknown
    what: str                # ``describe``: what the user called
    module: str = ""         # the user's own module whose forward made the call: "'block.0' (MySquash)", or ""


def call_of(fx_node, fn) -> Call:
    what = describe_module(fx_node.target, fn) if fx_node.op == "call_module" else describe(fx_node.target)
    stack = [(path, cls) for path, cls in (fx_node.meta.get("nn_module_stack") or {}).values()
             if isinstance(cls, type) and not cls.__module__.startswith(("torch.", "spikec."))]
    module = f"{stack[-1][0]!r} ({stack[-1][1].__qualname__})" if stack and fx_node.op != "call_module" else ""
    return Call(fx_node.op, fx_node.target, fx_node.name, fx_node.stack_trace, what, module)


def user_line(call) -> str:
    """``file:line: code`` of the user's code that made the call (the last frame outside torch and spikec)."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)', call.stack_trace or "")
    user = [f for f in frames if not re.search(r"[/\\](torch|spikec)[/\\]", f[0])]  # none: a torch container's call
    return f"{user[-1][0]}:{user[-1][1]}: {user[-1][2].strip()}" if user else ""


def where(call) -> str:
    line = user_line(call)
    what = f"module {call.target!r}" if call.op == "call_module" else f"fx node {call.name!r}"
    inside = f" in module {call.module}" if getattr(call, "module", "") else ""
    return what + inside + (f" ({line})" if line else "")


def describe_module(path, module) -> str:
    """``module 'a.b' (torch.nn...Class)``."""
    cls = type(module)
    return f"module {path!r} ({cls.__module__}.{cls.__qualname__})"


def describe(target) -> str:
    """What the user called: ``method exp``, ``function torch.sigmoid`` or ``indexing x[...]``."""
    if target is operator.getitem:
        return "indexing x[...]"
    if isinstance(target, str):
        return f"method {target}"
    return f"function {getattr(target, '__module__', '')}.{getattr(target, '__name__', target)}"


def remedy_for(call) -> str:
    """How to teach spikec the call itself, when its ATen form cannot be lowered."""
    if call.op == "call_module":
        return "or register a converter for its class with spikec.frontend.register_converter(cls, fn)"
    return "or register a converter with spikec.frontend.register_function(target, fn)"
