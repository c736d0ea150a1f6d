"""Commute TDM through the following convolution (passes.md, "TDM dual-kernel commutation").

``Conv(W*, TDM(x))_t = W_a * x_t - W_b * x_{t-1} + b*`` with ``W_a = W* diag(1 + lambda)`` and
``W_b = W* diag(lambda)`` (input channels). ``x_{t-1}`` is a ``Delay(1)`` node; the pair is summed by an
``add`` that takes the conv's name. Exact for any ``x``; accumulate-only exactly when ``x`` is binary.
"""

from spikec.ir.graph import Graph, Node
from spikec.core.passes import Pass, PassResult, Skip
from spikec.core.rewrite import splice


def dual_kernels(w, lam):
    """(W_a, W_b) for a (C_out, C_in, kh, kw) kernel and per-input-channel ``lam``."""
    lam = lam.reshape(1, -1, 1, 1)
    return w * (1 + lam), w * lam


def _rewrite(graph: Graph, tdm, convs, notes):
    x = graph.node(tdm.inputs[0])
    prev = Node(f"{tdm.name}.prev", "delay", (x.name,), x.type, {"steps": 1}, {}, tdm.scope)
    replace = {tdm.name: [prev]}
    for conv in convs:
        w_a, w_b = dual_kernels(conv.params["weight"], tdm.params["lam"])
        now = conv.with_(name=f"{conv.name}.now", inputs=(x.name,), params={**conv.params, "weight": w_a})
        past = conv.with_(name=f"{conv.name}.past", inputs=(prev.name,), params={"weight": -w_b})
        total = Node(conv.name, "add", (now.name, past.name), conv.type, {}, {}, conv.scope)
        replace[conv.name] = [now, past, total]
        mode = "accumulate-only (binary operand)" if x.type.kind == "binary" else \
            f"stays MAC ({x.type.kind} operand), exact"
        notes.append(f"{conv.name}: dual kernel over {x.name!r} and its Delay(1): {mode}")
    return replace


def tdm_dual_kernel(graph: Graph) -> PassResult:
    changed, skipped, notes = [], [], []
    for tdm in [n for n in graph.nodes if n.op == "tdm"]:
        convs = graph.consumers(tdm.name)
        if tdm.name in graph.outputs or not convs or any(c.op != "conv2d" for c in convs):
            skipped.append(Skip(tdm.name, "the TDM output is read by something other than a convolution",
                                "only a TDM whose every reader is a conv2d commutes into dual kernels"))
            continue
        if any(c.attrs["groups"] != 1 for c in convs):
            skipped.append(Skip(tdm.name, "a reading convolution is grouped", "use groups=1"))
            continue
        graph = splice(graph, _rewrite(graph, tdm, convs, notes))
        changed += [tdm.name] + [c.name for c in convs]
    return PassResult(graph, tuple(changed), tuple(skipped), tuple(notes))


TDM_DUAL_KERNEL = Pass("tdm_dual_kernel", tdm_dual_kernel,
                       requires="a TDM read only by ungrouped conv2d nodes",
                       ensures="no TDM before a conv; each conv is W_a*x_t + (-W_b)*x_{t-1}, summed under its name")
