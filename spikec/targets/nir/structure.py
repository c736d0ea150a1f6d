"""NIR export of the IR's ``reshape`` nodes: NIR has no reshape node, so a reshape is written as what it is.

* a reshape to a vector (N,) -> ``Flatten`` over every per-sample dim (an identity for a vector already);
* a ``(C, L)`` step viewed as ``(C, 1, L)`` for a ``conv2d`` whose kernel is ``(1, k)`` (how spikec and ATen run a
  Conv1d), and that conv's ``(C', 1, L')`` viewed back as ``(C', L')`` -> one NIR ``Conv1d`` on ``(C, L)``: the two
  reshapes carry no node (their values are the Conv1d's input and output, element for element);
* any other reshape is refused, naming the shapes.
"""
import nir
import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ops.structure import unit_view


def _refuse(node, why: str):
    raise UnsupportedOp(f"cannot be exported to NIR exactly: {why}", where=f"node {node.name!r} ({node.op})",
                        remedy="reshape to a vector (a NIR Flatten), or use a Conv1d / Conv2d / Linear layout")


def _state(ex) -> dict:
    return ex.__dict__.setdefault("conv1d", {"views": set(), "outputs": set()})


def _conv1d_kernel(ex, name: str) -> bool:
    n = ex.graph.node(name)
    if n.op in ("avgpool2d", "maxpool2d"):   # a 1-D pool (AvgPool1d, MaxPool1d on (C, L)): kernel (1, k), no
        a = n.attrs                          # padding over the 1
        return tuple(a["kernel"])[0] == 1 and tuple(a["stride"])[0] == 1 and tuple(a["padding"])[0] == 0
    if n.op != "conv2d":
        return False
    a, w = n.attrs, np.asarray(n.params["weight"])
    pad = a["padding"]
    return w.shape[2] == 1 and not isinstance(pad, str) and int(np.broadcast_to(pad, (2,))[0]) == 0


def reshape(ex, node) -> None:
    src = ex.graph.node(node.inputs[0])
    x, y = tuple(src.type.shape), tuple(node.type.shape)
    state = _state(ex)
    if unit_view(x, y) == "adds" and ex.users.get(node.name) and \
            all(_conv1d_kernel(ex, u) for u in ex.users[node.name]):
        state["views"].add(node.name)
        ex.sources[node.name] = list(ex.sources[src.name])
        return
    if src.name in state["outputs"] and unit_view(x, y) == "drops":
        return ex.single(node, ex.sources[src.name][0])
    if len(y) == 1:
        if len(x) == 1:
            ex.sources[node.name] = list(ex.sources[src.name])
            return
        flat = nir.Flatten(input_type={"input": np.array(x)}, start_dim=0, end_dim=len(x) - 1)
        return ex.single(node, ex.add(node.name, flat, node.inputs))
    _refuse(node, f"a reshape {x} -> {y}: NIR has no reshape node (only Flatten to a vector, and a Conv1d's "
            "(C, L) <-> (C, 1, L) view)")


def is_conv1d(ex, node) -> bool:
    return node.inputs[0] in _state(ex)["views"]


def conv1d(ex, node) -> None:
    """A ``(1, k)`` conv2d on a viewed ``(C, L)`` step as NIR ``Conv1d`` (a grouped kernel written dense: nir 1.0.8
    types a conv by ``weight.shape[1]``)."""
    a = node.attrs
    w = np.asarray(node.params["weight"], dtype=np.float64)[:, :, 0, :]
    b = np.asarray(node.params["bias"], dtype=np.float64) if "bias" in node.params else np.zeros(w.shape[0])
    groups = int(a["groups"])
    if groups != 1:
        c_out, c_in_g, k = w.shape
        dense, per_out = np.zeros((c_out, c_in_g * groups, k)), c_out // groups
        for g in range(groups):
            dense[g * per_out:(g + 1) * per_out, g * c_in_g:(g + 1) * c_in_g] = w[g * per_out:(g + 1) * per_out]
        w = dense
    second = lambda v: int(np.broadcast_to(np.asarray(v), (2,))[1])
    length = int(ex.graph.node(node.inputs[0]).type.shape[2])
    conv = nir.Conv1d(input_shape=length, weight=w, stride=second(a["stride"]), padding=second(a["padding"]),
                      dilation=second(a["dilation"]), groups=1, bias=b)
    name = ex.add(node.name, conv, node.inputs)
    ex.sources[node.name] = [name]   # no carrier: the IR value is (C', 1, L'), the NIR node's (C', L')
    _state(ex)["outputs"].add(node.name)
    ex.notes.append(f"{node.name}: a (1, k) conv on a (C, L) step viewed as (C, 1, L): NIR Conv1d")


def pool1d(ex, node) -> None:
    """A 1-D average pool on a viewed ``(C, L)`` step (``AvgPool1d``: a ``(1, k)`` avgpool2d) as NIR ``Conv1d`` with
    ``1/k`` on each channel's diagonal, stride and zero padding as the pool's (the padded zeros counted, as
    ``count_include_pad=True``). Exact for a power-of-two ``k``: ``x / k`` is then ``x * (1/k)`` and scaling by it
    commutes with rounding; another ``k`` rounds otherwise and is refused."""
    a = node.attrs
    k, stride, pad = (int(tuple(a[n])[1]) for n in ("kernel", "stride", "padding"))
    if a.get("ceil_mode") or (pad and not a.get("count_include_pad", True)) or k & (k - 1):
        _refuse(node, f"a 1-D average pool of kernel {k}{', ceil_mode' if a.get('ceil_mode') else ''}"
                f"{', count_include_pad=False' if pad and not a.get('count_include_pad', True) else ''}: NIR has no "
                "1-D pool; it is written as a Conv1d of weight 1/k, which is the pool's x/k exactly only for a "
                "power-of-two k, with the padded zeros counted and the output size floored")
    x = ex.graph.node(node.inputs[0]).type.shape
    c, length = int(x[0]), int(x[2])
    w = np.zeros((c, c, k))
    w[np.arange(c), np.arange(c), :] = 1.0 / k
    conv = nir.Conv1d(input_shape=length, weight=w, stride=stride, padding=pad, dilation=1, groups=1,
                      bias=np.zeros(c))
    name = ex.add(node.name, conv, node.inputs)
    ex.sources[node.name] = [name]
    _state(ex)["outputs"].add(node.name)
    ex.notes.append(f"{node.name}: a 1-D average pool (kernel {k}) on a (C, L) step as NIR Conv1d (weight 1/{k})")


def maxpool1d(ex, node) -> None:
    """A 1-D max pool over binary spikes on a viewed ``(C, L)`` step (``MaxPool1d``: a ``(1, k)`` maxpool2d) as an
    OR, as the 2-d max pool over spikes: a depthwise all-ones NIR ``Conv1d`` (written dense) into a LIF firing on a
    window sum > 0.5 (a padded place adds nothing, as a max over spikes leaves it out)."""
    a = node.attrs
    x = ex.graph.node(node.inputs[0]).type
    if x.kind != "binary":
        _refuse(node, f"a 1-D max pool over {x.kind} values: only a max over binary spikes (an OR) has an exact "
                "NIR form")
    if a.get("ceil_mode"):
        _refuse(node, "a 1-D max pool with ceil_mode=True has no Conv1d form")
    second = lambda v: int(np.broadcast_to(np.asarray(v), (2,))[1])
    k, stride, pad = second(a["kernel"]), second(a["stride"]), second(a["padding"])
    dilation = second(a.get("dilation", (1, 1)))
    c, length = int(x.shape[0]), int(x.shape[2])
    w = np.zeros((c, c, k))
    w[np.arange(c), np.arange(c), :] = 1.0
    window = ex.add(f"{node.name}.window", nir.Conv1d(input_shape=length, weight=w, stride=stride, padding=pad,
                                                      dilation=dilation, groups=1, bias=np.zeros(c)), node.inputs)
    shape = (c, int(node.type.shape[2]))
    lif = nir.LIF(tau=np.full(shape, ex.dt), r=np.ones(shape), v_leak=np.zeros(shape),
                  v_threshold=np.full(shape, 0.5), v_reset=np.zeros(shape))
    name = ex.add(node.name, lif)
    ex.edges.append((window, name))
    ex.sources[node.name] = [name]   # no carrier: the IR value is (C, 1, L'), the NIR node's (C, L')
    _state(ex)["outputs"].add(node.name)
    ex.notes.append(f"{node.name}: a 1-D max pool over binary spikes (kernel {k}) as an all-ones Conv1d window sum "
                    "firing on > 0.5")


def channel_conv1d(a: np.ndarray, b: np.ndarray, shape) -> nir.Conv1d:
    """``a x + b`` per channel of a ``(C, L)`` step: a kernel-1 Conv1d, written dense (diagonal) as ``conv1d``."""
    c = shape[0]
    return nir.Conv1d(input_shape=int(shape[1]), weight=np.diag(a).reshape(c, c, 1), stride=1, padding=0,
                      dilation=1, groups=1, bias=b)


def reduction(ex, node) -> None:
    """A ``sum`` / ``mean`` over every per-step dim but one, no keepdim (global pooling: ``x.mean(-1)`` of a
    ``(C, L)`` step, ``x.mean((-2, -1))`` of ``(C, H, W)``) as ``Flatten`` then an ``Affine`` whose row c holds 1
    (sum) or 1/n (mean) at the n inputs of channel c. A sum of spikes is exact; a mean of n values is
    ``sum_i x_i * (1/n)`` against torch's ``sum / n``: a few ulp (within the checker's bound, which compares it)."""
    x, a = tuple(ex.graph.node(node.inputs[0]).type.shape), node.attrs
    kept = [d for d in range(len(x)) if d not in tuple(a["dims"])]
    if a["keepdim"] or len(kept) != 1:
        _refuse(node, f"a {node.op} over dims {tuple(a['dims'])} of a {x} step (keepdim={a['keepdim']}): NIR has no "
                "reduction node; spikec writes one as an Affine only when it leaves one dim (global pooling)")
    n_in = int(np.prod(x))
    rows = np.indices(x)[kept[0]].reshape(-1)
    weight = np.zeros((x[kept[0]], n_in))
    weight[rows, np.arange(n_in)] = 1.0 / (n_in // x[kept[0]]) if node.op == "mean" else 1.0
    flat = ex.add(f"{node.name}.flatten", nir.Flatten(input_type={"input": np.array(x)}, start_dim=0,
                                                      end_dim=len(x) - 1), node.inputs)
    affine = ex.add(node.name, nir.Affine(weight=weight, bias=np.zeros(weight.shape[0])))
    ex.edges.append((flat, affine))
    ex.single(node, affine)
    n = n_in // x[kept[0]]
    ulp = node.op == "mean" and n & (n - 1)   # 1/n a binary fraction (n a power of two): the same value exactly
    ex.notes.append(f"{node.name}: a {node.op} over dims {tuple(a['dims'])} as Flatten and an Affine"
                    + (f" (weights 1/{n}, not a binary fraction: equal to a few ulp)" if ulp else ""))
