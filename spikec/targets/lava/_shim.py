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

Not a break, a cost (``memoize_model_search``, used by the warm runner only): Lava's compiler finds a Process's
ProcessModels by executing, afresh, every module of the Process's directory once per module of its package
(``ProcGroupDiGraphs._find_proc_models``: spikec's ``procs/`` directory is executed four times over), for every
Process type of every run: 10-60 ms a type, a third of a small network's Lava job. The runner memoizes that search
per Process type and makes it, before it forks any job, for the types spikec builds, so each job inherits the
answers. The answer is a function of the type and of the files on disk, which do not change under a running
compiler; a type the runner did not search is searched by the job, as Lava does.
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


def memoize_model_search(types=()) -> None:
    """Memoize Lava's ProcessModel search per Process type (see the module docstring), then search ``types``."""
    from lava.magma.compiler.compiler_graphs import ProcGroupDiGraphs
    if getattr(ProcGroupDiGraphs._find_proc_models, "memo", None) is None:
        search, memo = ProcGroupDiGraphs._find_proc_models, {}

        def find_proc_models(proc):
            if type(proc) not in memo:
                memo[type(proc)] = tuple(search(proc))
            return list(memo[type(proc)])
        find_proc_models.memo = memo
        ProcGroupDiGraphs._find_proc_models = staticmethod(find_proc_models)
    for cls in types:
        probe = object.__new__(cls)   # the search reads only its type; never initialised, never run
        probe._runtime = None         # what AbstractProcess.__del__ looks at
        ProcGroupDiGraphs._find_proc_models(probe)


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
