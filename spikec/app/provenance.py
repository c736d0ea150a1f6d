"""What an OUTDIR keeps so that ``spikec verify`` needs nothing outside it and trusts nothing in report.json.

``OUTDIR/source/`` holds a copy of the model file under its own name (``net.py``; a ``.nir`` model as
``model.nir``), the sibling modules it imports under theirs, and the model's ``state_dict`` as spikec loaded
it (``weights.pt``, a plain state_dict whatever the user's checkpoint was, so verify never unpickles). The
report's ``provenance`` records absolute paths and SHA-256 hashes of the originals, for people, and
``source_file``, the copy's name in OUTDIR (``source/net.py``; OUTDIRs that predate it hold ``source/model.py``).
verify reads code and weights only from ``OUTDIR/source`` (and runs that code only when told ``--run-source``)
or from paths given on its own command line.

A model given as a module *instance* (the Python API) has no MODEL spec. Its OUTDIR records the class
(``provenance.instance``) and ``weights.pt``; when the class is defined at the top level of a ``.py`` file and
``cls()`` rebuilds the same module (same ``repr``, same state_dict keys and shapes), that file is copied
with the class as the factory, so ``verify`` runs as for a ``FILE.py:factory``. Otherwise the
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

from spikec.ir.errors import BadInput

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
        record = {"model": opts.model, "factory": instance["factory"], "model_file": instance["file"],
                  "instance": instance, "weights": _file_record(opts.weights), "inputs": _file_record(inputs_file)}
    else:
        factory = None if opts.model.endswith(".nir") else opts.model.rpartition(":")[2]
        record = {"model": opts.model, "factory": factory, "model_file": _file_record(model_file(opts.model)),
                  "weights": _file_record(opts.weights), "inputs": _file_record(inputs_file)}
    entry = _entry_file(opts, record)
    return {**record, "source_file": f"{SOURCE_DIR}/{entry.name}" if entry else None}


def _entry_file(opts, record: dict | None) -> Path | None:
    """The Python file OUTDIR/source holds a copy of (None for a .nir model, or a module instance with no code)."""
    if opts.model.endswith(".nir"):
        return None
    if is_instance(opts.model):  # the class's file only when its class rebuilds the module
        instance = (record or {}).get("instance")
        src = Path(instance["file"]["path"]) if instance and instance.get("factory") else None
    else:
        src = model_file(opts.model)
    return src if src is not None and src.suffix == ".py" and src.is_file() else None


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
    """``OUTDIR`` file name -> writer, for the copies verify runs from (``record``: the report's provenance). The
    model file keeps its own name and its siblings theirs, so each import in them finds what it found before."""
    if opts.model.endswith(".nir"):
        src = model_file(opts.model)
        return {f"{SOURCE_DIR}/{NIR_COPY}": lambda p: shutil.copyfile(src, p)}
    files = {f"{SOURCE_DIR}/{WEIGHTS_COPY}": lambda p: torch.save(model.state_dict(), p)}
    src = _entry_file(opts, record)
    if src is not None:
        files[f"{SOURCE_DIR}/{src.name}"] = lambda p: shutil.copyfile(src, p)
        for rel, path in sibling_modules(src).items():
            files.setdefault(f"{SOURCE_DIR}/{rel}", lambda p, path=path: shutil.copyfile(path, p))
    return files


def source_entry(outdir: Path, report: dict) -> Path:
    """The copied model file in ``outdir/source`` the report names (``source/model.py`` for older OUTDIRs); BadInput
    when the name is not a plain ``NAME.py`` directly in ``source/`` (the report is data: it picks no other file)."""
    name = (report.get("provenance") or {}).get("source_file", f"{SOURCE_DIR}/{MODEL_COPY}")
    if name is None:
        name = f"{SOURCE_DIR}/{MODEL_COPY}"
    base = name.removeprefix(f"{SOURCE_DIR}/") if isinstance(name, str) else ""
    if not isinstance(name, str) or not name.startswith(f"{SOURCE_DIR}/") or not base.endswith(".py") \
            or "/" in base or "\0" in base or base.startswith(".") or base in (".py", ""):
        raise BadInput(f"{str(outdir)!r}: report.json names no valid source file ({name!r})",
                       remedy="recompile, or pass --model FILE.py:factory to verify against the original model")
    return Path(outdir) / SOURCE_DIR / base


def source_spec(outdir: Path, report: dict) -> tuple[str, str | None]:
    """``(MODEL spec, weights path)`` of the copies in ``outdir/source``; BadInput when they are missing."""
    src = Path(outdir) / SOURCE_DIR
    if (src / NIR_COPY).is_file():
        return str(src / NIR_COPY), None
    factory = (report.get("provenance") or {}).get("factory")
    instance = (report.get("provenance") or {}).get("instance")
    entry = source_entry(outdir, report)
    if is_instance(report.get("model")) and not entry.is_file():
        why = instance.get("not_rebuildable") if isinstance(instance, dict) else None
        raise BadInput(f"{str(outdir)!r} was compiled from a module instance ({report['model'][len(INSTANCE):-1]}) "
                       f"and holds no code to rebuild it" + (f": {why}" if isinstance(why, str) else ""),
                       remedy=f"verify against the model: --model FILE.py:factory --weights "
                              f"{src / WEIGHTS_COPY} (or spikec.verify(outdir, model=your_module))")
    if not isinstance(factory, str) or not factory.isidentifier():
        raise BadInput(f"{str(outdir)!r}: report.json names no valid factory ({factory!r})",
                       remedy="pass --model FILE.py:factory to verify against the original model")
    if not entry.is_file():
        raise BadInput(f"{str(outdir)!r} holds no copy of the model source ({SOURCE_DIR}/{entry.name})",
                       remedy="pass --model FILE.py:factory (and --weights) to verify against the original model")
    weights = src / WEIGHTS_COPY
    return f"{entry}:{factory}", str(weights) if weights.is_file() else None
