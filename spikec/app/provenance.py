"""What an OUTDIR keeps so that ``spikec verify`` needs nothing outside it and trusts nothing in report.json.

``OUTDIR/source/`` holds a copy of the model file (``model.py``, or ``model.nir``) and the model's
``state_dict`` as spikec loaded it (``weights.pt``, a plain state_dict whatever the user's checkpoint
was, so verify never unpickles). The report's ``provenance`` records absolute paths and SHA-256 hashes of
the originals, for people; verify reads code and weights only from ``OUTDIR/source`` or from paths given
on its own command line.

A model given as a module *instance* (the Python API) has no MODEL spec. Its OUTDIR records the class
(``provenance.instance``) and ``weights.pt``; when the class is defined at the top level of a ``.py`` file and
``cls()`` rebuilds the same module (same ``repr``, same state_dict keys and shapes), that file is copied as
``model.py`` with the class as the factory, so ``verify`` runs as for a ``FILE.py:factory``. Otherwise the
OUTDIR holds no code and ``verify`` refuses by name, asking for ``--model`` (``source_spec``).
"""
import ast
import contextlib
import hashlib
import importlib.util
import inspect
import shutil
import sys
from pathlib import Path

import torch

from spikec.compiler.errors import BadInput

SOURCE_DIR = "source"
MODEL_COPY, NIR_COPY, WEIGHTS_COPY = "model.py", "model.nir", "weights.pt"
INSTANCE = "<instance of "  # the MODEL recorded for a module instance: "<instance of pkg.module.Class>"


def instance_spec(model) -> str:
    cls = type(model)
    return f"{INSTANCE}{cls.__module__}.{cls.__qualname__}>"


def is_instance(spec: str) -> bool:
    return isinstance(spec, str) and spec.startswith(INSTANCE)


def _class_file(cls) -> Path | None:
    """The ``.py`` file defining ``cls`` (also for a module loaded by path, which is not in ``sys.modules``)."""
    try:
        found = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        found = None
    if found is None:
        codes = [f.__code__ for f in vars(cls).values() if hasattr(f, "__code__")]
        found = codes[0].co_filename if codes else None
    return Path(found).absolute() if found and found.endswith(".py") and Path(found).is_file() else None


def _rebuilds(model, cls) -> str | None:
    """Why ``cls()`` does not rebuild ``model`` (None when it does); the global RNG is left as it was."""
    try:
        with contextlib.redirect_stdout(sys.stderr), torch.random.fork_rng(devices=[]):
            fresh = cls()
        theirs, ours = model.state_dict(), fresh.state_dict()
        if repr(fresh) != repr(model) or list(theirs) != list(ours) \
                or any(tuple(theirs[k].shape) != tuple(ours[k].shape) for k in theirs):
            return f"{cls.__qualname__}() builds a different module (its layers or their sizes differ)"
    except Exception as e:  # a constructor that needs arguments, or fails: no code verify could run
        return f"{cls.__qualname__}() raised {type(e).__name__}: {e}"
    return None


def instance_record(model) -> dict:
    """The class of a module instance, its file, and whether the OUTDIR can rebuild it from that file."""
    cls = type(model)
    src = _class_file(cls)
    if src is None or "." in cls.__qualname__ or not cls.__qualname__.isidentifier():
        why = "its class is not defined at the top level of a .py file"
    else:
        why = _rebuilds(model, cls)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "file": _file_record(src),
            "factory": cls.__qualname__ if why is None else None, "not_rebuildable": why}


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


def provenance(opts, inputs_file: str | None, model=None) -> dict:
    """Absolute paths and hashes of everything the compile read (information, never authority)."""
    if is_instance(opts.model):
        instance = instance_record(model)
        return {"model": opts.model, "factory": instance["factory"], "model_file": instance["file"],
                "instance": instance, "weights": _file_record(opts.weights), "inputs": _file_record(inputs_file)}
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


def source_files(opts, model: torch.nn.Module, record: dict | None = None) -> dict:
    """``OUTDIR`` file name -> writer, for the copies verify runs from (``record``: the report's provenance)."""
    instance = (record or {}).get("instance")
    if is_instance(opts.model):  # the class's file only when its class rebuilds the module
        src = Path(instance["file"]["path"]) if instance and instance.get("factory") else None
    else:
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
    instance = (report.get("provenance") or {}).get("instance")
    if is_instance(report.get("model")) and not (src / MODEL_COPY).is_file():
        why = instance.get("not_rebuildable") if isinstance(instance, dict) else None
        raise BadInput(f"{str(outdir)!r} was compiled from a module instance ({report['model'][len(INSTANCE):-1]}) "
                       f"and holds no code to rebuild it" + (f": {why}" if isinstance(why, str) else ""),
                       remedy=f"verify against the model: --model FILE.py:factory --weights "
                              f"{src / WEIGHTS_COPY} (or spikec.verify(outdir, model=your_module))")
    if not isinstance(factory, str) or not factory.isidentifier():
        raise BadInput(f"{str(outdir)!r}: report.json names no valid factory ({factory!r})",
                       remedy="pass --model FILE.py:factory to verify against the original model")
    if not (src / MODEL_COPY).is_file():
        raise BadInput(f"{str(outdir)!r} holds no copy of the model source ({SOURCE_DIR}/{MODEL_COPY})",
                       remedy="pass --model FILE.py:factory (and --weights) to verify against the original model")
    weights = src / WEIGHTS_COPY
    return f"{src / MODEL_COPY}:{factory}", str(weights) if weights.is_file() else None
