"""Import lava-nc 0.10.0 on Python 3.11 without touching site-packages.

lava 0.10.0 declares ``python < 3.11``. Its only known break on 3.11 is in
``lava/magma/compiler/var_model.py``::

    @dataclass
    class ByteEncoder: ...              # eq=True, so __hash__ = None (unhashable)

    @dataclass
    class CoreEncoder:
        x: ByteEncoder = ByteEncoder()  # 3.11: "mutable default ... use default_factory"

Python 3.11 rejects any *unhashable* default (3.10 rejected only list/dict/set). The shim
restores the 3.10 behaviour for that one class and nothing else: while (and only while)
``var_model`` is first imported, ``dataclasses.dataclass`` is wrapped so that the class named
``ByteEncoder`` defined in that module keeps the identity hash ``object.__hash__``. Its
equality, fields and the shared default instance are exactly what lava gets on 3.10.
The wrapper is removed as soon as the import returns; no other class, module or file changes.

A second, order-dependent break (not specific to 3.11): lava's
``lava/magma/runtime/message_infrastructure/multiprocessing.py`` calls
``multiprocessing.set_start_method('fork')`` at import, which raises "context has already been set"
once anything in the process has touched the default context -- tqdm does, by creating its
multiprocessing lock, so any interpreter run with a progress bar before the first Lava import
triggers it. While that module is first imported, ``set_start_method('fork')`` becomes a no-op if
the start method already is ``fork``, and is forced otherwise (Lava's runtime needs ``fork``).

Not a break, a cost (``cache_model_discovery``): Lava's compiler finds a Process's ProcessModels by executing
every module file in the Process's directory afresh (``ProcGroupDiGraphs._find_proc_models``), for each
Process of each run -- about 0.5 s of CPU per run, most of a small run's compile. The answer depends only on
the Process's class (the same files, the same canonical model classes), so the runner (``runner.py``) keeps it
per class, found once before it forks its jobs: every run selects exactly the models it selected before.
"""
import dataclasses
import importlib
import multiprocessing
import sys

_MODULE = "lava.magma.compiler.var_model"
_MP_MODULE = "lava.magma.runtime.message_infrastructure.multiprocessing"


def _patched(orig):
    def dataclass(cls=None, /, **kwargs):
        def wrap(c):
            out = orig(c, **kwargs) if kwargs else orig(c)
            if c.__module__ == _MODULE and c.__name__ == "ByteEncoder" and out.__hash__ is None:
                out.__hash__ = object.__hash__
            return out
        return wrap if cls is None else wrap(cls)
    return dataclass


def _import_mp_module():
    if _MP_MODULE in sys.modules:
        return
    current = multiprocessing.get_start_method(allow_none=True)
    orig = multiprocessing.set_start_method

    def set_start_method(method, force=False):
        if method == current:
            return None
        return orig(method, force=True)

    multiprocessing.set_start_method = set_start_method if current is not None else orig
    try:
        importlib.import_module(_MP_MODULE)
    finally:
        multiprocessing.set_start_method = orig


def import_lava():
    """Import (once) the two lava modules that break, with their shims; later lava imports just work."""
    if _MODULE not in sys.modules:
        orig = dataclasses.dataclass
        dataclasses.dataclass = _patched(orig)
        try:
            importlib.import_module(_MODULE)
        finally:
            dataclasses.dataclass = orig
    _import_mp_module()
    return sys.modules[_MODULE]


def cache_model_discovery(classes=()) -> None:
    """Keep Lava's ProcessModel discovery per Process class (see the module docstring); find it now for
    ``classes`` (Process classes), so that processes forked later inherit it. Idempotent."""
    from lava.magma.compiler.compiler_graphs import ProcGroupDiGraphs
    find = ProcGroupDiGraphs.__dict__["_find_proc_models"].__func__
    if getattr(find, "spikec_cached", False):
        found = find.spikec_found
    else:
        found, lavas = {}, find

        def cached(proc):
            key = type(proc)
            if key not in found:
                found[key] = tuple(lavas(proc))   # raises NoProcessModelFound as Lava does (not kept)
            return list(found[key])   # a fresh list: the caller owns it, as Lava's own returns
        cached.spikec_cached, cached.spikec_found = True, found
        ProcGroupDiGraphs._find_proc_models = staticmethod(cached)
        find = cached
    for cls in classes:
        if cls not in found:
            try:
                proc = object.__new__(cls)   # discovery reads only the class (module, file, identity)
                proc._runtime = None   # what Process.__del__ (stop) reads
                find(proc)
            except Exception:   # e.g. no CPU model: a run using it fails there, as it would without the cache
                pass
