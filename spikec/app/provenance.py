"""What an OUTDIR keeps so that ``spikec verify`` needs nothing outside it and trusts nothing in report.json.

``OUTDIR/source/`` holds a copy of the model file (``model.py``, or ``model.nir``) and the model's
``state_dict`` as spikec loaded it (``weights.pt``, a plain state_dict whatever the user's checkpoint
was, so verify never unpickles). The report's ``provenance`` records absolute paths and SHA-256 hashes of
the originals, for people; verify reads code and weights only from ``OUTDIR/source`` or from paths given
on its own command line.
"""
import ast
import hashlib
import importlib.util
import shutil
from pathlib import Path

import torch

from spikec.compiler.errors import BadInput

SOURCE_DIR = "source"
MODEL_COPY, NIR_COPY, WEIGHTS_COPY = "model.py", "model.nir", "weights.pt"


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_file(spec: str) -> Path | None:
    """The file a MODEL spec loads code or a graph from (None when it cannot be found)."""
    if spec.endswith(".nir"):
        return Path(spec).absolute()
    where = spec.rpartition(":")[0]
    if where.endswith(".py"):
        return Path(where).absolute()
    try:
        found = importlib.util.find_spec(where)
    except (ImportError, ValueError):
        return None
    return Path(found.origin).absolute() if found and found.origin else None


def _file_record(path) -> dict | None:
    if not path:
        return None
    p = Path(path).absolute()
    return {"path": str(p), "sha256": sha256(p) if p.is_file() else None}


def provenance(opts, inputs_file: str | None) -> dict:
    """Absolute paths and hashes of everything the compile read (information, never authority)."""
    factory = None if opts.model.endswith(".nir") else opts.model.rpartition(":")[2]
    return {"model": opts.model, "factory": factory, "model_file": _file_record(model_file(opts.model)),
            "weights": _file_record(opts.weights), "inputs": _file_record(inputs_file)}


def _imported_names(path: Path) -> set[str]:
    """Absolute module names a Python file imports (``import a.b``, ``from a.b import c``)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}  # ``from pkg import module``
    return names


def sibling_modules(src: Path) -> dict[str, Path]:
    """The Python files beside the model file that it imports, directly or through each other (a data helper,
    a layers module, a local package), by path relative to the model's folder. Read from the import
    statements, so the answer does not depend on what this process happens to have loaded."""
    root, src = src.parent.resolve(), src.resolve()
    found, todo = {}, [src]
    while todo:
        for name in sorted(_imported_names(todo.pop())):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # each package on the way, then the module
                base = root.joinpath(*parts[:i])
                for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                    rel = str(candidate.relative_to(root))
                    if candidate.is_file() and candidate != src and rel not in found:
                        found[rel] = candidate
                        todo.append(candidate)
    return found


def source_files(opts, model: torch.nn.Module) -> dict:
    """``OUTDIR`` file name -> writer, for the copies verify runs from."""
    src = model_file(opts.model)
    if opts.model.endswith(".nir"):
        return {f"{SOURCE_DIR}/{NIR_COPY}": lambda p: shutil.copyfile(src, p)}
    files = {f"{SOURCE_DIR}/{WEIGHTS_COPY}": lambda p: torch.save(model.state_dict(), p)}
    if src is not None and src.is_file():
        files[f"{SOURCE_DIR}/{MODEL_COPY}"] = lambda p: shutil.copyfile(src, p)
        for rel, path in sibling_modules(src).items():
            if rel != MODEL_COPY:
                files[f"{SOURCE_DIR}/{rel}"] = lambda p, path=path: shutil.copyfile(path, p)
    return files


def source_spec(outdir: Path, report: dict) -> tuple[str, str | None]:
    """``(MODEL spec, weights path)`` of the copies in ``outdir/source``; BadInput when they are missing."""
    src = Path(outdir) / SOURCE_DIR
    if (src / NIR_COPY).is_file():
        return str(src / NIR_COPY), None
    factory = (report.get("provenance") or {}).get("factory")
    if not isinstance(factory, str) or not factory.isidentifier():
        raise BadInput(f"{str(outdir)!r}: report.json names no valid factory ({factory!r})",
                       remedy="pass --model FILE.py:factory to verify against the original model")
    if not (src / MODEL_COPY).is_file():
        raise BadInput(f"{str(outdir)!r} holds no copy of the model source ({SOURCE_DIR}/{MODEL_COPY})",
                       remedy="pass --model FILE.py:factory (and --weights) to verify against the original model")
    weights = src / WEIGHTS_COPY
    return f"{src / MODEL_COPY}:{factory}", str(weights) if weights.is_file() else None
