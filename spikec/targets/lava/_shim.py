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
"""
import dataclasses
import importlib
import sys

_MODULE = "lava.magma.compiler.var_model"


def _patched(orig):
    def dataclass(cls=None, /, **kwargs):
        def wrap(c):
            out = orig(c, **kwargs) if kwargs else orig(c)
            if c.__module__ == _MODULE and c.__name__ == "ByteEncoder" and out.__hash__ is None:
                out.__hash__ = object.__hash__
            return out
        return wrap if cls is None else wrap(cls)
    return dataclass


def import_lava():
    """Import (once) the var_model module with the shim in place; later lava imports then just work."""
    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    orig = dataclasses.dataclass
    dataclasses.dataclass = _patched(orig)
    try:
        return importlib.import_module(_MODULE)
    finally:
        dataclasses.dataclass = orig
