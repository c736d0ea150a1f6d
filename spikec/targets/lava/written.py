"""The Lava target's artifacts as writers that also read themselves back.

``spikec compile`` writes ``lava/`` and ``model.net`` into a fresh directory and, before publishing it, calls each
writer's ``read_back(path)`` (``spikec.app.driver.check_written``): the files are read through the loaders
``spikec verify`` and ``spikec.load`` use (``read_lava``: ``load_deployed``, ``load``; h5py for netx's HDF5) and compared with what
the compile computed, node by node and array by array. What differs is returned by name; a file that does not load
raises. Either is a compiler bug, never a published OUTDIR.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from spikec.ir.errors import IRError
from spikec.ir.graph import Graph
from spikec.core.serialize import graph_to_json


@dataclass(frozen=True)
class LavaDir:
    """``lava/``: ``write(path)`` writes it; ``qgraph`` (the integer reference, or None for a TTFS deployment, whose
    integer form is ``graph.json`` itself), ``network`` (the network.json document) and ``arrays`` (params.npz) are
    what it must read back as; ``read(path)`` reads it as ``spikec.load`` and ``spikec verify`` do, returning
    ``(integer graph or None, network, arrays)`` (``spikec.targets.lava.read_lava``)."""
    write: Callable
    qgraph: Graph | None
    network: dict
    arrays: dict
    read: Callable | None = None   # set by compile_lava (the loaders live in the package, which imports this)

    def __call__(self, path) -> None:
        self.write(path)

    def read_back(self, path) -> list[str]:
        path = Path(path)
        if self.read is None:
            raise IRError("the lava/ writer has no reader", where=str(path),
                          remedy="this is a compiler bug: compile_lava gives every writer it returns read_lava")
        q, net, arrays = self.read(path)
        differs = []
        if self.qgraph is not None:
            differs += [f"{path.name}/quantized: {n}" for n in graph_differences(self.qgraph, q)]
        if net != json.loads(json.dumps(self.network)):
            differs.append(f"{path.name}/network.json")
        differs += [f"{path.name}/params.npz: {k}" for k in sorted(set(arrays) | set(self.arrays))
                    if k not in arrays or k not in self.arrays or not _same(arrays[k], self.arrays[k])]
        return differs


@dataclass(frozen=True)
class NetxFile:
    """``model.net``: netx's HDF5 of ``qgraph``; read back with h5py against a fresh write of the same graph."""
    qgraph: Graph

    def __call__(self, path) -> None:
        from spikec.targets.lava import netx
        netx.write(self.qgraph, path)

    def read_back(self, path) -> list[str]:
        import tempfile
        from spikec.targets.lava import leftovers
        with tempfile.TemporaryDirectory(prefix=f"spikec-netx-{leftovers.new_tag()}-") as d:   # swept if killed
            self(Path(d) / "model.net")
            want = _h5_items(Path(d) / "model.net")
        got = _h5_items(Path(path))
        return [f"{Path(path).name}: {k}" for k in sorted(set(want) | set(got))
                if k not in want or k not in got or not _same(want[k], got[k])]


def graph_differences(want: Graph, got: Graph) -> list[str]:
    """Nodes of ``want`` that ``got`` lacks or holds with other parameters (values or dtypes), and the structure."""
    out = [n.name for n in want.nodes
           if n.name not in got or set(n.params) != set(got.node(n.name).params)
           or any(not _same(v, got.node(n.name).params[k]) for k, v in n.params.items())]
    if not out and graph_to_json(want) != graph_to_json(got):
        out.append("graph structure or attributes")
    return out


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def _h5_items(path: Path) -> dict:
    import h5py
    items = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: items.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return items


def network_differences(fresh: dict, written: dict) -> list[str]:
    """``network.json: <key or process>`` for each part of the written document that is not the lowering's."""
    fresh = json.loads(json.dumps(fresh))   # as written and read back (tuples become lists)
    by_name = lambda procs: {p.get("name"): p for p in procs if isinstance(p, dict)} \
        if isinstance(procs, list) else {}
    differs = [f"network.json: process {name!r}" for name in sorted(set(by_name(fresh.get("processes")))
                                                                   | set(by_name(written.get("processes"))), key=str)
               if by_name(fresh.get("processes")).get(name) != by_name(written.get("processes")).get(name)]
    return differs + [f"network.json: {k}" for k in sorted(set(fresh) | set(written), key=str)
                      if k != "processes" and fresh.get(k) != written.get(k)]
