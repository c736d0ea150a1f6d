"""Load the user's model factory, checkpoint and input file, turning every failure into a clear BadInput."""
import importlib
import importlib.machinery
import importlib.util
import sys
import zipfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from spikec.app import files
from spikec.app.option_checks import not_a_file  # torch-free: the CLI's early checks use it too
from spikec.ir.errors import BadInput, CheckpointError, ModelLoadError

SPEC_HINT = "MODEL is path/to/file.py:factory or package.module:factory; the factory returns an nn.Module"


def load_factory(spec: str):
    """Resolve ``path/to/file.py:factory`` or ``package.module:factory`` to the factory callable."""
    where, _, attr = spec.rpartition(":")
    if ":" not in spec or not attr:
        raise ModelLoadError(f"MODEL {spec!r} names no factory", remedy=SPEC_HINT)
    if not attr.isidentifier():
        raise ModelLoadError(f"MODEL {spec!r}: the factory {attr!r} is not a Python name", remedy=SPEC_HINT)
    if not where.strip():
        raise ModelLoadError(f"MODEL {spec!r} names no file or module before ':'", remedy=SPEC_HINT)
    if "\0" in where:
        raise ModelLoadError(f"MODEL {spec!r} contains a NUL byte", remedy=SPEC_HINT)
    if where.endswith(".py"):
        module = _module_from_file(Path(where))
    else:
        try:
            module = importlib.import_module(where)
        except (ImportError, ValueError, TypeError) as e:  # '', '.x' (relative) and the like are not ImportErrors
            raise ModelLoadError(f"cannot import module {where!r}: {e}", remedy=SPEC_HINT) from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        found = ", ".join(n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_"))
        raise ModelLoadError(f"factory {attr!r} not found in {where}", where=spec,
                             remedy=f"callables defined there: {found or 'none'}")
    return factory


def _module_from_file(path: Path):
    what = not_a_file(path)
    if what:
        raise ModelLoadError(f"model file {str(path)!r} {what}", remedy=SPEC_HINT)
    name = f"spikec_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))  # let the file import its siblings
    no_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ beside the user's file (or inside an OUTDIR being verified)
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:  # user code exiting must not pass for spikec's own exit status
        raise ModelLoadError(f"importing {str(path)!r} called sys.exit({e.code!r})",
                             remedy="a model file must not exit when imported; guard scripts with "
                                    "`if __name__ == '__main__':`") from e
    except Exception as e:
        raise ModelLoadError(f"importing {str(path)!r} raised {type(e).__name__}: {e}",
                             remedy="fix the model file so that it imports on its own") from e
    finally:
        sys.dont_write_bytecode = no_bytecode
        sys.path.pop(0)
    return module


def installed_module(name: str) -> str | None:
    """Where ``name`` is found as a built-in, standard-library or installed top-level module (None if it is not):
    searched in the interpreter's own folders (site-packages, the standard library) and by the import hooks
    installers add (editable installs), never in the current directory or a user's folder on ``sys.path``."""
    if name in sys.builtin_module_names or name in getattr(sys, "stdlib_module_names", ()) or name == "spikec":
        return "the standard library" if name != "spikec" else "spikec itself"
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots = [p for p in sys.path if p and any(q == Path(p).resolve() or q in Path(p).resolve().parents
                                              for q in prefixes)]
    found = importlib.machinery.PathFinder.find_spec(name, roots)
    for finder in sys.meta_path:
        if found is not None:
            break
        if finder in (importlib.machinery.PathFinder, importlib.machinery.BuiltinImporter,
                      importlib.machinery.FrozenImporter) or not hasattr(finder, "find_spec"):
            continue
        try:
            found = finder.find_spec(name, None)
        except Exception:  # an import hook that cannot answer for this name: it does not provide it
            found = None
    if found is None:
        return None
    return str(found.origin or (list(found.submodule_search_locations or []) or [name])[0])


def check_no_shadowing(folder: Path) -> None:
    """BadInput naming the first module in ``folder`` (a ``.py``, a compiled module, a package or a plain folder)
    whose name is that of an installed one: with ``folder`` first on ``sys.path`` it would replace it (a planted
    ``sklearn.py`` would run inside torch's own imports)."""
    suffixes = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)
    for entry in sorted(Path(folder).iterdir()):
        if entry.is_dir():
            name = entry.name
        else:
            name = next((entry.name[:-len(s)] for s in suffixes if entry.name.endswith(s)), None)
        if not name or name == "__pycache__" or not name.isidentifier():
            continue
        where = installed_module(name)
        if where:
            raise ModelLoadError(f"{str(entry)!r} has the name of the installed module {name!r} ({where}): run from "
                                 "there it would replace that module wherever it is imported",
                                 remedy="verify against your own copy of the model with --model FILE.py:factory "
                                        "(and --weights), or without --run-source")


def _factory_remedy(factory) -> str:
    """The remedy for a factory that raised: its required parameters when it has any (spikec calls it with none),
    else its own error to fix."""
    import inspect
    try:
        required = [p.name for p in inspect.signature(factory).parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        required = []
    if required:
        return (f"spikec calls the factory with no arguments, and it requires {', '.join(required)}: give them "
                "defaults, or add a factory that passes them (def make(): return Net(...))")
    return ("fix the error the factory raises when called as factory() (spikec --debug compile ... shows its "
            "traceback)")


def build_model(spec: str, *, nir_dt: float = 1e-4, nir_scheme: str = "snntorch",
                allow_unstable: bool = False) -> nn.Module:
    """The source model: a factory's module, or a ``.nir`` file run at ``nir_dt`` in ``nir_scheme``."""
    if spec.endswith(".nir"):
        path = Path(spec)
        what = not_a_file(path)
        if what:
            raise ModelLoadError(f"NIR file {spec!r} {what}",
                                 remedy="give the path of a .nir file written by nir.write (or a FILE.py:factory)")
        from spikec.frontend.nir_file import nir_model
        return nir_model(spec, dt=nir_dt, scheme=nir_scheme, allow_unstable=allow_unstable)
    factory = load_factory(spec)
    try:
        model = factory()
    except SystemExit as e:
        raise ModelLoadError(f"the factory called sys.exit({e.code!r})", where=spec,
                             remedy="the factory must return the model, not exit") from e
    except Exception as e:
        raise ModelLoadError(f"the factory raised {type(e).__name__}: {e}", where=spec,
                             remedy=_factory_remedy(factory)) from e
    if not isinstance(model, nn.Module):
        raise ModelLoadError(f"the factory returned {type(model).__name__}, not an nn.Module", where=spec,
                             remedy=SPEC_HINT)
    return model


def load_weights(model: nn.Module, path: str, *, trust_pickle: bool = False, search_path: str | None = None) -> None:
    """Load a state_dict (``weights_only=True``); a pickled module only with ``trust_pickle``.

    Every entry is checked against the model before anything is copied: its key, that it is a tensor, its
    shape, its kind of dtype (a float parameter takes only floats) and that it is finite.
    """
    p = Path(path)
    what = not_a_file(p)
    if what:
        raise CheckpointError(f"checkpoint {path!r} {what}", remedy=CHECKPOINT_HINT)
    try:
        with files.open_regular(p, "checkpoint", remedy=CHECKPOINT_HINT) as f:
            state = torch.load(f, map_location="cpu", weights_only=True)
    except BadInput:
        raise
    except Exception as e:
        if not trust_pickle:
            first = (str(e).splitlines() or [""])[0]
            raise CheckpointError(
                f"checkpoint {path!r} is not a plain state_dict ({type(e).__name__}: {first})",
                remedy="save it with torch.save(model.state_dict(), path); or, if you trust the file's author, "
                       "pass --trust-pickle (unpickling runs arbitrary code)") from e
        state = _unpickle(p, search_path)
    if isinstance(state, nn.Module):
        state = state.state_dict()
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path!r} holds a {type(state).__name__}, not a state_dict",
                              remedy=STATE_HINT)
    _check_state(model, state, path)
    try:
        result = model.load_state_dict(state, strict=False)
    except (RuntimeError, TypeError, ValueError, AttributeError) as e:  # what _check_state did not foresee
        raise CheckpointError(f"checkpoint {path!r} cannot be loaded into the model: {e}", remedy=STATE_HINT) from e
    if result.missing_keys or result.unexpected_keys:
        raise CheckpointError(f"checkpoint {path!r} does not fit the model: missing keys "
                              f"{result.missing_keys or 'none'}; unexpected keys {result.unexpected_keys or 'none'}",
                              remedy="use the checkpoint saved from this factory's model")


CHECKPOINT_HINT = "give --weights the file written by torch.save(model.state_dict(), path)"
STATE_HINT = "save it with torch.save(model.state_dict(), path): a flat dict of parameter name -> tensor"


def _check_state(model: nn.Module, state: dict, path) -> None:
    """A CheckpointError naming the first entry of ``state`` the model cannot take as it is."""
    where = f"checkpoint {str(path)!r}"
    bad_keys = [k for k in state if not isinstance(k, str)]
    if bad_keys:
        raise CheckpointError(f"{where} has a key {bad_keys[0]!r} of type {type(bad_keys[0]).__name__}; "
                              "state_dict keys are parameter names (strings)", remedy=STATE_HINT)
    nested = [k for k, v in state.items() if isinstance(v, dict) and not k.endswith("_extra_state")]
    if nested:
        raise CheckpointError(f"{where}: key {nested[0]!r} holds a dict, not a tensor (a nested checkpoint, "
                              f"e.g. {{'{nested[0]}': model.state_dict(), ...}}?)",
                              remedy=f"save the state_dict itself, e.g. torch.save(checkpoint[{nested[0]!r}], path)")
    wanted = model.state_dict()
    for key, value in state.items():
        if key.endswith("_extra_state") and key in wanted:
            continue  # a module's get_extra_state(): any object, by design
        if not isinstance(value, torch.Tensor):
            raise CheckpointError(f"{where}: {key!r} holds a {type(value).__name__}, not a tensor", remedy=STATE_HINT)
        if value.is_meta or value.layout is not torch.strided:  # no values to read (meta) or not a plain array
            raise CheckpointError(f"{where}: {key!r} is {'on the meta device' if value.is_meta else 'a sparse tensor'}"
                                  ", not a dense tensor of values",
                                  remedy="save the dense state_dict of a model on the CPU (t.to_dense(), t.cpu())")
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise CheckpointError(f"{where} has NaN or Inf in {key}",
                                  remedy="retrain or repair those tensors; a non-finite weight has no deployment")
        if key not in wanted:
            continue  # reported with every other unexpected key by load_state_dict
        own = wanted[key]
        if tuple(value.shape) != tuple(own.shape):
            raise CheckpointError(f"{where}: {key!r} has shape {tuple(value.shape)}, the model's has shape "
                                  f"{tuple(own.shape)}", remedy="use the checkpoint saved from this factory's model")
        if value.is_complex() or (own.is_floating_point() and not value.is_floating_point()) \
                or (not own.is_floating_point() and value.is_floating_point()):
            raise CheckpointError(f"{where}: {key!r} has dtype {str(value.dtype).removeprefix('torch.')}, the model's "
                                  f"has {str(own.dtype).removeprefix('torch.')}",
                                  remedy="save the model's own state_dict (its tensors keep their dtypes)")


def _unpickle(p: Path, search_path: str | None):
    if search_path:
        sys.path.insert(0, search_path)
    try:
        return torch.load(p, map_location="cpu", weights_only=False)
    except Exception as e:
        raise CheckpointError(f"checkpoint {str(p)!r} cannot be unpickled: {type(e).__name__}: {e}",
                              remedy="check the file is a torch.save() output whose classes are importable") from e
    finally:
        if search_path:
            sys.path.remove(search_path)


def check_params_finite(model: nn.Module) -> None:
    empty = [k for k, v in list(model.named_parameters()) + list(model.named_buffers())
             if v.is_meta or v.layout is not torch.strided]
    if empty:
        raise BadInput(f"the model's tensor {empty[0]} is meta or sparse: it holds no dense values to compile",
                       where=f"model {type(model).__qualname__}",
                       remedy="build the model on the CPU with real tensors (not device='meta'), dense (t.to_dense())")
    bad = [k for k, v in list(model.named_parameters()) + list(model.named_buffers())
           if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"the model has NaN or Inf in {', '.join(bad)}",
                              remedy="fix the factory or the checkpoint")


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable``; 8 GiB where the system does not say)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 8 << 30


def default_max_input_bytes() -> int:
    """An eighth of the memory available now: the verification runs record every node's ``[T, B, ...]``
    trace, many times the input's size."""
    return max(available_memory() // 8, 1 << 20)


# the float64 [T, B, ...] values a compile holds at once, per traced node: the source's run with its recorded
# module outputs and the IR's run recording every node (the passes' checks reuse and then free them)
RUNS_HELD = 2


def check_compile_memory(graph, steps: int, batch: int) -> None:
    """Refuse up front a compile whose recorded runs would not fit in the memory available: the input limit
    bounds the input alone, and a deep network records many times its size (a small, highly compressed input
    file can pass it and still need tens of GB)."""
    values = sum(int(np.prod(n.type.shape, dtype=object)) * n.type.substeps
                 for n in graph.nodes)
    need, avail = RUNS_HELD * 8 * int(steps) * int(batch) * values, available_memory()
    if need > avail:
        per_sample = need // max(int(batch), 1)
        raise BadInput(f"this compile would hold about {need / 2**20:,.1f} MB of recorded values ({len(graph.nodes)} "
                       f"nodes x T={steps} x B={batch} in float64, twice), but {avail / 2**20:,.1f} MB is available",
                       where=f"model {graph.meta.get('source', '')}".strip(),
                       remedy=f"verify on fewer samples (about {max(avail // max(per_sample, 1), 1):,} fit) or fewer "
                              "steps, or free memory")


def check_input_size(shape, what: str, max_bytes: int | None) -> None:
    """Refuse an input whose float64 copy would exceed ``max_bytes``, before anything is allocated."""
    limit = default_max_input_bytes() if max_bytes is None else max_bytes
    need = 8 * int(np.prod([int(d) for d in shape], dtype=object))
    if need > limit:
        raise BadInput(f"{what} has shape {tuple(int(d) for d in shape)}: {need:,} bytes as float64, over the "
                       f"limit of {limit:,} bytes", remedy="use fewer samples or steps, or raise the limit with "
                                                        "--max-input-bytes N")


def npz_header(z, key: str, path) -> tuple:
    """``(shape, dtype)`` of ``key`` in an open NpzFile, read from the array header without loading the data."""
    try:
        with z.zip.open(f"{key}.npy") as f:
            version = np.lib.format.read_magic(f)
            shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                               else np.lib.format.read_array_header_2_0(f))
    except (KeyError, OSError, ValueError) as e:
        raise BadInput(f"cannot read array {key!r} of {str(path)!r}: {e}", remedy="write it with np.savez") from e
    return shape, dtype


def load_npz(path, keys=None, *, max_bytes: int | None = None, what: str = "file", required=(),
             nofollow: bool = False) -> dict:
    """Arrays of an ``.npz`` (no pickles), each size-checked from its header before it is read. The file must be a
    regular file (never a FIFO or a device); ``nofollow``: not a symbolic link either (a file inside an OUTDIR)."""
    remedy = "give an .npz written by np.savez"
    with files.open_regular(path, what, nofollow=nofollow, remedy=remedy) as f:
        try:
            z = np.load(f, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise BadInput(f"cannot read {what} {str(path)!r}: {e}", remedy=remedy) from e
        if not isinstance(z, np.lib.npyio.NpzFile):  # a bare .npy array
            raise BadInput(f"{what} {str(path)!r} is a single .npy array, not an .npz archive",
                           remedy="save it with np.savez(path, input=x)")
        try:
            with z:
                return _arrays(z, path, keys, max_bytes, what, required)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise BadInput(f"cannot read {what} {str(path)!r}: {e}", remedy=remedy) from e


def _arrays(z, path, keys, max_bytes, what: str, required) -> dict:
    missing = [k for k in required if k not in z.files]
    if missing:
        raise BadInput(f"{what} {str(path)!r} has no key {missing[0]!r} (keys: {z.files})",
                       remedy="save it with np.savez(path, input=x) where x is [T, B, ...]")
    out = {}
    for key in z.files if keys is None else keys:
        if key not in z.files:
            continue
        shape, dtype = npz_header(z, key, path)
        if dtype.hasobject:
            raise BadInput(f"array {key!r} of {what} {str(path)!r} holds Python objects",
                           remedy="save plain numeric arrays (np.savez)")
        check_input_size(shape, f"array {key!r} of {what} {str(path)!r}", max_bytes)
        out[key] = z[key]
    return out


def check_spike_input(x: np.ndarray, what: str, min_ndim: int = 3) -> np.ndarray:
    """``x`` as float64 if it is a finite, non-empty ``[T, B, ...]`` number array; else BadInput naming ``what``.

    ``min_ndim`` 2: a loop model's static ``[B, ...]`` input is accepted too."""
    remedy = "save it with np.savez(path, input=x): x a finite float, int or bool array laid out [T, B, *input_shape]"
    if x.dtype.kind not in "fiub":
        raise BadInput(f"{what} must be finite numbers, got dtype {x.dtype}", remedy=remedy)
    if x.ndim < min_ndim:
        raise BadInput(f"{what} has shape {x.shape}; expected [T, B, ...] (at least 3 dimensions)", remedy=remedy)
    if 0 in x.shape:
        raise BadInput(f"{what} is empty: shape {x.shape}; expected [T, B, ...] (T steps, B samples, per-step shape)",
                       remedy=remedy)
    with np.errstate(over="ignore"):
        x = x.astype(np.float64)
    if not np.isfinite(x).all():
        layout = " (laid out [T, B, ...], or [B, ...] for a loop model)" if x.ndim < 3 else ""
        raise BadInput(f"{what} must be finite numbers{layout}: it holds NaN or Inf", remedy=remedy)
    return x


def load_inputs(path: str, max_bytes: int | None = None, min_ndim: int = 3) -> np.ndarray:
    if not str(path).strip():
        raise BadInput("--inputs names no file (an empty path)", remedy="give --inputs an .npz file, or drop it")
    x = load_npz(path, ["input"], max_bytes=max_bytes, what="inputs file", required=("input",))["input"]
    return check_spike_input(x, f"array 'input' of {str(path)!r}", min_ndim)


def value_kind(x: np.ndarray) -> tuple[str, int | None]:
    """The value kind an input array carries: binary, integer (with its ceiling) or real."""
    if np.isin(x, (0.0, 1.0)).all():
        return "binary", None
    if (x >= 0).all() and np.array_equal(x, np.round(x)):
        return "integer", int(x.max())
    return "real", None
