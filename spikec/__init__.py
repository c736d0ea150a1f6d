"""spikec: a neuromorphic deployment compiler that proves every rewrite and backend equivalent.

The Python API (``spikec/app/api.py``), imported on first use so that ``import spikec.nn`` stays light::

    c = spikec.compile(model, x, targets=("lava", "nir", "onnx"))
    c.equivalent, c.targets["lava"]["bit_exact"]
    spikec.verify(c.save("build/out"))
"""
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spikec.app.api import Compilation, UnexpectedError, compile, verify

_API = ("compile", "verify", "Compilation", "UnexpectedError")
__all__ = ["compile", "verify", "Compilation", "UnexpectedError", "load"]  # literal: linters read it


def __getattr__(name: str):
    if name in _API:
        from spikec.app import api
        return getattr(api, name)
    raise AttributeError(f"module 'spikec' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_API})


def load(outdir):
    """The integer reference of a Lava compile in ``outdir``, batched and Lava-free (``model(x, dequantize=True)``)."""
    import os
    from spikec.ir.errors import BadInput
    if not isinstance(outdir, (str, os.PathLike)):
        raise BadInput(f"spikec.load(): the OUTDIR is a {type(outdir).__name__}, not a path",
                       remedy="give the OUTDIR of a Lava compile as a str or a pathlib.Path")
    from spikec.targets.lava import load as _load
    return _load(outdir)
