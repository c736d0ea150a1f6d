"""A loop's record written into a preallocated tensor, as Norse's tutorials write it::

    voltages = torch.zeros(T, B, 10)
    for ts in range(T):
        ...
        voltages[ts, :, :] = v
    return voltages

The concrete trace (``loop.concrete_trace``) records the buffer as a tensor constant and each write as
``__setitem__``. When every step ``0 .. T-1`` of the buffer is written exactly once, whole (``buffer[t]``,
``buffer[t, :, ...]``), by a value of the slot's shape (and dtype, or a float of another precision: the record
``dtype=torch.float`` of Norse's ConvNet), and nothing else reads the buffer, its content
is ``torch.stack`` of the written values, whatever it held before: ``as_stacked`` rewrites it so. Anything else is
left as it is (the loop capture then names what forward returns)."""
import torch


def step_index(index) -> int | None:
    """``k`` of a step read or write ``v[k]``, ``v[k, :]``, ``v[k, ...]`` (the rest whole slices), else None."""
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    whole = lambda i: i is Ellipsis or (isinstance(i, slice) and (i.start, i.stop, i.step) == (None, None, None))
    if isinstance(index, tuple) and index and step_index(index[0]) is not None and all(map(whole, index[1:])):
        return index[0]
    return None


def _value(n):
    return n.meta.get("value") if isinstance(n, torch.fx.Node) else None


def _writes(graph: torch.fx.Graph, target: str) -> list | None:
    """The ``__setitem__`` nodes writing the constant ``target`` in graph order, or None when anything else reads it."""
    writes = []
    for n in graph.nodes:
        if n.op == "get_attr" and n.target == target:
            for user in n.users:
                if user.op == "output":
                    continue
                if not (user.op == "call_method" and user.target == "__setitem__" and user.args[0] is n):
                    return None
                writes.append(user)
    order = {n: i for i, n in enumerate(graph.nodes)}
    return sorted(writes, key=order.__getitem__)


def _whole_steps(writes: list, buffer) -> bool:
    steps = [step_index(w.args[1]) for w in writes]
    if steps != list(range(len(writes))) or buffer is None or buffer.shape[0] != len(writes):
        return False
    for w in writes:
        v = _value(w.args[2])
        if not isinstance(v, torch.Tensor) or tuple(v.shape) != tuple(buffer.shape[1:]):
            return False
        if v.dtype != buffer.dtype and not (v.is_floating_point() and buffer.is_floating_point()):
            return False   # a float written into a float record of another precision is its value cast: the checker
            # compares a float32 record within float32's rounding (checker.F32_REL_TOL), a float64 one exactly
    return True


def as_stacked(root: torch.nn.Module, graph: torch.fx.Graph) -> torch.fx.Graph:
    """``graph`` with each output that is a buffer written whole once per step as ``torch.stack`` of the writes."""
    out = next(n for n in graph.nodes if n.op == "output")
    items = out.args[0] if isinstance(out.args[0], (tuple, list)) else (out.args[0],)
    new, replaced = list(items), []
    for i, it in enumerate(items):
        if not (isinstance(it, torch.fx.Node) and it.op == "get_attr"):
            continue
        writes = _writes(graph, it.target)
        buffer = getattr(root, it.target, None) if isinstance(it.target, str) else None
        if not writes or not _whole_steps(writes, buffer if isinstance(buffer, torch.Tensor) else _value(it)):
            continue
        with graph.inserting_before(out):
            stacked = graph.call_function(torch.stack, ([w.args[2] for w in writes],), {"dim": 0})
        stacked.meta["value"] = torch.stack([_value(w.args[2]) for w in writes])
        new[i] = stacked
        replaced.append(it)
        for w in writes:
            ref = w.args[0]
            graph.erase_node(w)
            if not ref.users:
                graph.erase_node(ref)
    if replaced:
        out.args = (tuple(new) if isinstance(out.args[0], (tuple, list)) else new[0],)
        for it in replaced:
            if it in graph.nodes and not it.users:
                graph.erase_node(it)
    return graph
