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
