"""Save and load the IR as ``graph.json`` + ``weights.npz`` (bit-exact round trip).

Versions: 2 names every firing threshold ``threshold``; version 1 named it ``v_th`` in ``silif`` / ``csilif``
and ``theta`` in ``ttfs_fire``. A version-1 document is upgraded on load (``upgrade``), its weights with it.
"""
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from spikec.ir.errors import IRError
from spikec.ir.graph import Graph, Node, TensorType, thaw
from spikec.core.verify import verify
from spikec.ops.neurons import CSILIF, SILIF

FORMAT, VERSION = "spikec-ir", 2
# parameters renamed by each format version: RENAMED[v] turns a version-v document into a version v + 1 one
RENAMED = {1: {SILIF: {"v_th": "threshold"}, CSILIF: {"v_th": "threshold"}, "ttfs_fire": {"theta": "threshold"}}}


def graph_to_json(graph: Graph) -> dict:
    return {"format": FORMAT, "version": VERSION, "outputs": list(graph.outputs), "meta": thaw(graph.meta),
            "nodes": [{"name": n.name, "op": n.op, "inputs": list(n.inputs), "type": n.type.to_json(),
                       "attrs": thaw(n.attrs), "params": sorted(n.params), "scope": n.scope}
                      for n in graph.nodes]}


def upgrade(doc: dict, weights: dict) -> tuple[dict, dict]:
    """``(doc, weights)`` of an older well-formed document rewritten to the current version (new objects; the
    arguments are not changed): each version's renamed parameters take their new names in both."""
    version, weights = doc["version"], dict(weights)
    while version < VERSION:
        nodes = []
        for d in doc["nodes"]:
            renames = RENAMED[version].get(d["op"], {})
            for old, new in renames.items():
                if old in d["params"] and f"{d['name']}/{old}" in weights:
                    weights[f"{d['name']}/{new}"] = weights.pop(f"{d['name']}/{old}")
            nodes.append({**d, "params": [renames.get(p, p) for p in d["params"]]})
        version += 1
        doc = {**doc, "version": version, "nodes": nodes}
    return doc, weights


def graph_from_json(doc: dict, weights) -> Graph:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or type(doc.get("version")) is not int \
            or not 1 <= doc["version"] <= VERSION:
        found = f"format={doc.get('format')!r}, version={doc.get('version')!r}" if isinstance(doc, dict) else \
            f"a JSON {type(doc).__name__}"
        raise IRError(f"not a {FORMAT} document of version 1..{VERSION} ({found})")
    problem = _document_problem(doc)
    if problem:
        raise IRError(problem)
    doc, weights = upgrade(doc, weights)
    nodes = []
    for d in doc["nodes"]:
        where = f"node {d['name']!r}"
        missing = [p for p in d["params"] if f"{d['name']}/{p}" not in weights]
        if missing:
            raise IRError(f"{where}: parameter {missing[0]!r} is not in weights.npz")
        try:
            nodes.append(Node(d["name"], d["op"], tuple(d["inputs"]), TensorType.from_json(d["type"]),
                              d["attrs"], {p: weights[f"{d['name']}/{p}"] for p in d["params"]}, d.get("scope", "")))
        except IRError as e:
            raise IRError(f"{where}: {e.what}") from e
    return verify(Graph(tuple(nodes), tuple(doc["outputs"]), doc.get("meta", {})), "after loading")


def _document_problem(doc: dict) -> str | None:
    """What makes ``doc`` not a graph document (a JSON type in the wrong place), naming the node and field."""
    def is_list_of(v, t):
        return isinstance(v, list) and all(isinstance(x, t) for x in v)

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)
    if not isinstance(doc.get("nodes"), list):
        return f"'nodes' is {type(doc.get('nodes')).__name__}, not a list of nodes"
    if not is_list_of(doc.get("outputs"), str):
        return f"'outputs' is {doc.get('outputs')!r}, not a list of node names"
    if not isinstance(doc.get("meta", {}), dict):
        return "'meta' is not an object"
    for i, d in enumerate(doc["nodes"]):
        if not isinstance(d, dict):
            return f"node #{i} is a JSON {type(d).__name__}, not an object"
        if not isinstance(d.get("name"), str):
            return f"node #{i} has name {d.get('name')!r}, not a string"
        where = f"node {d['name']!r}"
        t = d.get("type")
        fields = {"op": isinstance(d.get("op"), str), "inputs": is_list_of(d.get("inputs"), str),
                  "attrs": isinstance(d.get("attrs"), dict), "params": is_list_of(d.get("params"), str),
                  "scope": isinstance(d.get("scope", ""), str),
                  "type": isinstance(t, dict) and is_list_of(t.get("shape"), int)
                  and all(is_int(x) for x in t["shape"]) and isinstance(t.get("kind"), str)
                  and (t.get("ceiling") is None or is_int(t.get("ceiling"))) and is_int(t.get("substeps", 1))}
        wrong = [k for k, ok in fields.items() if not ok]
        if wrong:
            return f"{where}: field {wrong[0]!r} is malformed ({d.get(wrong[0])!r})"
    return None


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
    remedy = "recompile (`spikec compile` writes the IR and reads it back as written)"
    where = f"cannot load the IR from {directory}"
    try:
        doc = json.loads((directory / "graph.json").read_text())
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep to parse
        raise IRError(f"{where}: graph.json: {type(e).__name__}: {e}",
                      remedy="point at a directory written by `spikec compile` (graph.json + weights.npz)") from e
    try:
        z = np.load(directory / "weights.npz", allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with z:
            weights = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise IRError(f"{where}: weights.npz: {type(e).__name__}: {e}",
                      remedy="point at a directory written by `spikec compile` (graph.json + weights.npz)") from e
    odd = [(k, v.dtype) for k, v in weights.items() if v.dtype not in (np.dtype(np.float64), np.dtype(np.int64))]
    if odd:
        raise IRError(f"{where}: weights.npz array {odd[0][0]!r} has dtype {odd[0][1]}; the IR holds float64 and "
                      "int64 parameters only", remedy=remedy)
    try:
        return graph_from_json(doc, weights)
    except IRError as e:
        raise IRError(f"{where}: graph.json: {e.what}", where=e.where, remedy=e.remedy or remedy) from e
