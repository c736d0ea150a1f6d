"""Save and load the IR as ``graph.json`` + ``weights.npz`` (bit-exact round trip)."""
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from spikec.compiler.errors import IRError
from spikec.compiler.ir import Graph, Node, TensorType, thaw
from spikec.compiler.verify import verify

FORMAT, VERSION = "spikec-ir", 1


def graph_to_json(graph: Graph) -> dict:
    return {"format": FORMAT, "version": VERSION, "outputs": list(graph.outputs), "meta": thaw(graph.meta),
            "nodes": [{"name": n.name, "op": n.op, "inputs": list(n.inputs), "type": n.type.to_json(),
                       "attrs": thaw(n.attrs), "params": sorted(n.params), "scope": n.scope}
                      for n in graph.nodes]}


def graph_from_json(doc: dict, weights) -> Graph:
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise IRError(f"not a {FORMAT} v{VERSION} document (format={doc.get('format')!r}, "
                      f"version={doc.get('version')!r})")
    nodes = []
    for d in doc["nodes"]:
        params = {p: weights[f"{d['name']}/{p}"] for p in d["params"]}
        nodes.append(Node(d["name"], d["op"], tuple(d["inputs"]), TensorType.from_json(d["type"]),
                          d["attrs"], params, d.get("scope", "")))
    return verify(Graph(tuple(nodes), tuple(doc["outputs"]), doc.get("meta", {})), "after loading")


def default_mode(directory: bool = False) -> int:
    """The permission bits a plain open()/mkdir() would give under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path``: no half-written file is ever visible."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        os.chmod(tmp, default_mode())
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_graph(graph: Graph, directory) -> None:
    directory = Path(directory)
    arrays = {f"{n.name}/{k}": v for n in graph.nodes for k, v in n.params.items()}
    atomic_write(directory / "weights.npz", lambda tmp: _savez(tmp, arrays))
    text = json.dumps(graph_to_json(graph), indent=1, allow_nan=False)
    atomic_write(directory / "graph.json", lambda tmp: Path(tmp).write_text(text))


def _savez(tmp, arrays):
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)


def load_graph(directory) -> Graph:
    directory = Path(directory)
    try:
        doc = json.loads((directory / "graph.json").read_text())
        with np.load(directory / "weights.npz", allow_pickle=False) as z:
            weights = {k: z[k] for k in z.files}
        return graph_from_json(doc, weights)
    except (OSError, ValueError, KeyError) as e:
        raise IRError(f"cannot load the IR from {directory}: {type(e).__name__}: {e}",
                      remedy="point at a directory written by `spikec compile` (graph.json + weights.npz)") from e
