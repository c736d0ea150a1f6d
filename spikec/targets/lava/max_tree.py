"""A max pool of synaptic sums (snnTorch's ``Conv2d -> MaxPool2d -> Leaky``) on chip, exactly, in standard processes.

A max pool *before* a neuron pools integer currents, not spikes, so it is no OR layer. Lava's sigma-delta
processes (``lava.proc.sdn``: ``Delta``, ``SigmaDelta``, ``Sigma``, the neurons lava-dl's netx builds its SDNNs from
and runs on Loihi 2) compute it in integers, with graded spikes through ``Sparse`` synapses:

    Delta           d_t = c_t - c_{t-1}               the window's currents c (the synapse's sum) as deltas (vth 0)
    SigmaDelta(RELU) level l: sigma_t = sum of its weighted input deltas = M_l a_{l-1, t}; a_l = relu(sigma_t);
                    it sends a_l,t - a_l,t-1                    (vth 0: every delta is sent, no residue)
    Sigma           m_t = sum of its weighted input deltas = F a_L,t     into the neuron through an identity Sparse

A tournament makes the max out of ReLUs: ``max(a, b) = b + relu(a - b)``, with ``b = relu(b) - relu(-b)`` carried
through the level, so a pair costs three units and a carried value two; a window of ``n`` values takes
``ceil(log2 n)`` levels. Every unit sees a linear form of the previous level only, so no synapse needs a delay, and
every weight is +-1 (emitted as +-2 with ``weight_exp = -1``: Lava truncates a mixed-sign weight's LSB; the
sums it shifts are even). Latency: the Delta updates with the synapse's sum, level ``l`` ``l`` Lava steps later,
the Sigma ``L + 1`` later, the neuron one step after the Sigma (through an identity ``Sparse``: on chip a neuron
reaches another through synapses only).

Message widths: the sums are a neuron's synaptic input, within the range its 24-bit ``u = a << 6`` holds (calibration
keeps them there on the verification inputs), so the tree's differences and deltas stay within ``2^19``: 24-bit graded
messages hold them; the tree's own values are not checked against that beyond it.

The integer reference is ``maxpool2d`` of the integer sums (the pool's own op), which the chain computes for every
input: it is an identity, checked bit for bit against Lava like every other process. The pool's window may hold
any kernel, stride, padding, dilation and ceil_mode (padded positions are left out, as torch leaves them out).
A network on a sub-step schedule (an unrolled integer-firing neuron) keeps such a pool on the host (``on_chip``).
"""
from dataclasses import dataclass

import numpy as np

from spikec.ir.graph import Graph, Node
from spikec.ops.pooling import pool_attrs
from spikec.targets.lava.layout import lava_shape

LEVEL_TYPE, DELTA_TYPE, SIGMA_TYPE = "SigmaDelta", "Delta", "Sigma"
TYPES = (DELTA_TYPE, LEVEL_TYPE, SIGMA_TYPE)


@dataclass(frozen=True)
class Tree:
    """Per sample: ``levels[l]`` the ``(rows, cols, values)`` of level ``l + 1``'s matrix (cols index level ``l``,
    level 0 being the pool's input in IR flat order); ``final`` the Sigma's (rows: the pool's outputs, IR flat)."""
    units: tuple               # units per level, level 0 the inputs
    levels: tuple              # ((rows, cols, values) per level 1..L)
    final: tuple               # (rows, cols, values)


def windows(attrs: dict, in_shape, out_shape) -> list:
    """The IR flat input indices of each output's window (``(C, H, W)`` in and out; padding left out)."""
    a = dict(attrs)
    (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]
    dh, dw = a.get("dilation", (1, 1))
    c, h, w = in_shape
    _, oh, ow = out_shape
    out = []
    for ch in range(c):
        for i in range(oh):
            for j in range(ow):
                ys = [i * sh - ph + m * dh for m in range(kh)]
                xs = [j * sw - pw + n * dw for n in range(kw)]
                out.append([(ch * h + y) * w + x for y in ys if 0 <= y < h for x in xs if 0 <= x < w])
    return out


def tournament(wins: list, n_in: int) -> Tree:
    """The ReLU tournament of ``wins`` (each a non-empty list of input indices): pure index arithmetic."""
    forms = [[{i: 1} for i in win] for win in wins]   # each window's partial maxima, linear forms of the level
    units, levels = [n_in], []
    while any(len(f) > 1 for f in forms):
        rows, cols, vals, nxt = [], [], [], []
        count = 0

        def unit(form: dict, sign: int) -> int:   # a new unit relu(sign * form); its index
            nonlocal count
            for col, v in form.items():
                rows.append(count)
                cols.append(col)
                vals.append(sign * v)
            count += 1
            return count - 1

        for f in forms:
            new = []
            for k in range(0, len(f) - 1, 2):
                a, b = f[k], f[k + 1]
                diff = dict(a)
                for col, v in b.items():
                    diff[col] = diff.get(col, 0) - v
                r, p, n = unit(diff, 1), unit(b, 1), unit(b, -1)   # max(a, b) = relu(a - b) + relu(b) - relu(-b)
                new.append({r: 1, p: 1, n: -1})
            if len(f) % 2:
                p, n = unit(f[-1], 1), unit(f[-1], -1)
                new.append({p: 1, n: -1})
            nxt.append(new)
        levels.append(_triplets(rows, cols, vals))
        units.append(count)
        forms = nxt
    rows, cols, vals = [], [], []
    for o, (form,) in enumerate(forms):
        for col, v in form.items():
            rows.append(o)
            cols.append(col)
            vals.append(v)
    return Tree(tuple(units), tuple(levels), _triplets(rows, cols, vals))


def _triplets(rows, cols, vals) -> tuple:
    return (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), np.asarray(vals, dtype=np.int64))


def run(tree: Tree, x: np.ndarray) -> list:
    """What each level and the Sigma hold for the inputs ``x`` (``[N, inputs]``, IR flat, integers): the math the
    processes do, ``[level 1, ..., level L, the max]``, each ``[N, units]``."""
    from scipy.sparse import csr_matrix
    a, held = np.asarray(x, dtype=np.int64), []
    for (r, c, v), n in zip(tree.levels + (tree.final,), tree.units[1:] + (None,)):
        n = int(r.max()) + 1 if n is None else n   # the Sigma: one row per output
        a = (csr_matrix((v, (r, c)), shape=(n, a.shape[1])) @ a.T).T
        a = np.maximum(a, 0) if len(held) < len(tree.levels) else a
        held.append(np.asarray(a, dtype=np.int64))
    return held


def evaluate(tree: Tree, x: np.ndarray) -> np.ndarray:
    """The tree's outputs for one sample's inputs ``x`` (IR flat), in integers."""
    return run(tree, np.asarray(x)[None])[-1][0]


def tree_of(pool: Node, in_shape) -> Tree:
    return tournament(windows(pool_attrs(pool), in_shape, pool.type.shape), int(np.prod(in_shape)))


def depth(pool: Node, in_shape) -> int:
    """The tree's levels for ``pool``, from its windows alone (``ceil(log2 n)`` for the widest of ``n`` values)."""
    return (max(len(w) for w in windows(pool_attrs(pool), in_shape, pool.type.shape)) - 1).bit_length()


# -- the mapping: which pools go on chip --------------------------------------------------------
def on_chip(g: Graph, n: Node, is_neuron, is_twin) -> bool:
    """Whether max pool ``n`` over real values becomes a max tree: its one reader is a neuron (beside the twins
    reading that neuron's state) whose whole input it is, it is no graph output, and no value of the graph runs on
    sub-steps (pass unroll_virtual_steps: the network would run on a sub-step schedule, which the tree's processes,
    updating every Lava step, do not follow)."""
    if n.op != "maxpool2d" or g.node(n.inputs[0]).type.kind != "real" or n.name in g.outputs:
        return False
    readers = [m for m in g.nodes if n.name in m.inputs]
    neurons = [m for m in readers if is_neuron(m)]
    if len(neurons) != 1 or not all(m.inputs == neurons[0].inputs and (m is neurons[0] or is_twin(m))
                                    for m in readers):
        return False
    return not any(m.type.substeps > 1 for m in g.nodes)


# -- Lava: the processes and their folded matrices ----------------------------------------------------------
def records(name: str, tree: Tree, in_ir_shape, out_ir_shape, phi: int, period: int, ir_input: str) -> tuple:
    """``(process records, connections)`` of the tree: its Delta ``name.delta`` (updating at ``phi``; the caller
    connects its inputs), the levels, the Sigma ``name.sigma`` and the Sparse synapses between them."""
    procs = [{"name": f"{name}.delta", "type": DELTA_TYPE, "ir_shape": list(in_ir_shape), "ir_input": ir_input,
              "lava_shape": lava_shape(in_ir_shape), "start": phi, "latency": phi, "period": period, "emit": 1}]
    conns, prev, prev_shape = [], f"{name}.delta", list(in_ir_shape)
    mats = [(f"{name}.level{l + 1}", units) for l, units in enumerate(tree.units[1:])] + [(f"{name}.sigma", None)]
    for l, (dst, units) in enumerate(mats):
        syn = f"{dst}.synapse"
        ir = [int(units)] if units is not None else list(out_ir_shape)
        procs.append(_sparse(syn, name, l, ir, prev, prev_shape, phi + l + 1, dst))
        procs.append({"name": dst, "type": LEVEL_TYPE if units is not None else SIGMA_TYPE, "ir_shape": ir,
                      "lava_shape": lava_shape(ir), "start": phi + l + 1, "latency": phi + l + 1, "period": period,
                      "emit": 1, "input": syn, "inputs": [syn]})
        conns.append({"src": prev, "port": "s_out", "dst": syn, "dst_port": "s_in", "flatten": True})
        conns.append({"src": syn, "port": "a_out", "dst": dst, "dst_port": "a_in",
                      **({"reshape": True} if units is None else {})})
        prev, prev_shape = dst, ir
    out = f"{name}.out"   # neuron to neuron through a synapse, as on chip: the identity, 24-bit graded
    procs.append(_sparse(out, name, "identity", list(out_ir_shape), prev, list(out_ir_shape), phi + len(mats) + 1))
    conns.append({"src": prev, "port": "s_out", "dst": out, "dst_port": "s_in", "flatten": True})
    return procs, conns


def _sparse(syn: str, tree: str, matrix, ir: list, src: str, src_ir: list, latency: int, target=None) -> dict:
    """The record of a tree's graded ``Sparse``: matrix ``l`` (+-1, written +-2 with weight_exp -1: mixed signs) or
    the identity into the neuron (weight 1, excitatory)."""
    identity = matrix == "identity"
    return {"name": syn, "type": "Sparse", "tree": tree, "matrix": matrix, "num_message_bits": 24,
            "weight_exp": 0 if identity else -1, "ir_shape": ir, "lava_shape": lava_shape(ir), "rows_ir_shape": ir,
            "cols_ir_shape": src_ir, "input": src, "input_ir_shape": src_ir, "latency": latency, "delay": 0,
            "sign_mode": "excitatory" if identity else "mixed", **({"target": target} if target else {})}


def save(arrays: dict, name: str, tree: Tree) -> None:
    """The tree's per-sample matrices into the network's arrays (``name/m{l}/rows|cols|values``, ``name/units``)."""
    arrays[f"{name}/units"] = np.asarray(tree.units, dtype=np.int64)
    for l, (r, c, v) in enumerate(tree.levels + (tree.final,)):
        arrays[f"{name}/m{l}/rows"], arrays[f"{name}/m{l}/cols"], arrays[f"{name}/m{l}/values"] = r, c, v


def folded_matrix(arrays: dict, p: dict, batch: int):
    """Sparse synapse ``p`` of a tree for ``batch`` samples side by side: columns in the folded order of what it
    reads (the Delta: the pool input's ``(W, H, B C)``; a level: ``b U + u``), rows in that of what it feeds."""
    from scipy.sparse import csr_matrix, identity
    if p["matrix"] == "identity":
        return identity(batch * int(np.prod(p["rows_ir_shape"])), dtype=np.int32, format="csr")
    name, l = p["tree"], int(p["matrix"])
    r, c, v = _triplet(arrays, name, l)
    n_rows, n_cols = int(np.prod(p["rows_ir_shape"])), int(np.prod(p["cols_ir_shape"]))
    rows = np.concatenate([_folded(r, b, p["rows_ir_shape"], batch) for b in range(batch)])
    cols = np.concatenate([_folded(c, b, p["cols_ir_shape"], batch) for b in range(batch)])
    return csr_matrix((np.tile(2 * v, batch).astype(np.int32), (rows, cols)), shape=(batch * n_rows, batch * n_cols))


def _folded(idx: np.ndarray, b: int, ir_shape, batch: int) -> np.ndarray:
    """Sample ``b``'s IR flat indices ``idx`` in the folded Lava order: ``(W, H, B C)`` for a (C, H, W) layout,
    else ``b n + i``."""
    if len(ir_shape) != 3:
        return b * int(np.prod(ir_shape)) + idx
    c, h, w = ir_shape
    ch, rem = idx // (h * w), idx % (h * w)
    y, x = rem // w, rem % w
    return (x * h + y) * (batch * c) + b * c + ch


def matrix(arrays: dict, p: dict):
    """Sparse synapse ``p`` of a tree for one sample, in IR flat order (rows what it feeds, columns what it reads)."""
    from scipy.sparse import csr_matrix, identity
    if p["matrix"] == "identity":
        return identity(int(np.prod(p["rows_ir_shape"])), dtype=np.int64, format="csr")
    r, c, v = _triplet(arrays, p["tree"], p["matrix"])
    return csr_matrix((v, (r, c)), shape=(int(np.prod(p["rows_ir_shape"])), int(np.prod(p["cols_ir_shape"]))))


def _triplet(arrays: dict, tree: str, l) -> tuple:
    return tuple(arrays[f"{tree}/m{l}/{k}"] for k in ("rows", "cols", "values"))


def load(arrays: dict, name: str) -> Tree:
    """The tree ``save`` wrote into the network's arrays."""
    units = tuple(int(u) for u in arrays[f"{name}/units"])
    mats = tuple(_triplet(arrays, name, l) for l in range(len(units)))
    return Tree(units, mats[:-1], mats[-1])


def activity(net: dict, arrays: dict, values: dict) -> dict:
    """What each tree process sends on the integer reference's run ``values`` (``[T, B, ...]``; a nonzero is one
    graded message): the Delta its input's deltas, a level its units' deltas, the Sigma the max itself."""
    procs = {p["name"]: p for p in net["processes"]}
    out = {}
    for d in (p for p in net["processes"] if p["type"] == DELTA_TYPE):
        name = d["name"][:-len(".delta")]
        x = np.asarray(values[d["ir_input"]], dtype=np.int64)
        t, b = x.shape[:2]
        out[d["name"]] = np.diff(x, axis=0, prepend=0)
        *levels, m = run(load(arrays, name), x.reshape(t * b, -1))
        for l, a in enumerate(levels, start=1):
            out[f"{name}.level{l}"] = np.diff(a.reshape(t, b, -1), axis=0, prepend=0)
        out[f"{name}.sigma"] = m.reshape(t, b, *procs[f"{name}.sigma"]["ir_shape"])
    return out
