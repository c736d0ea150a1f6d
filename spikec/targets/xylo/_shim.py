"""Import Rockpool's XyloSim for Xylo Audio 2 (SYNS61201) without SynSense's closed ``samna`` and without touching
site-packages.

``rockpool/devices/xylo/__init__.py`` imports all three chip packages, and ``syns65302/__init__.py`` imports
``afe_samna_pdm`` (``import samna``) unguarded, so ``import rockpool.devices.xylo.syns61201`` fails where samna is
missing. ``syns61201/__init__.py`` itself guards every samna-backed module (it installs Rockpool's own
"missing backend" shims for them), and ``syns61201/xylo_sim.py`` needs only ``xylosim.v2`` (the C++ bit-accurate
core) and ``syns61300/xylo_sim.py``. So, only where samna does not import, the package ``rockpool.devices.xylo``
is entered in ``sys.modules`` as a bare package (its real ``__path__``, its ``__init__`` not run): its
subpackages then import as they are, and the hardware modules stay Rockpool's missing-backend shims. Where samna
is installed nothing is shimmed.
"""
import importlib
import importlib.util
import os
import sys
import types

PACKAGE = "rockpool.devices.xylo"


def _bare_package() -> None:
    devices = importlib.import_module("rockpool.devices")
    module = types.ModuleType(PACKAGE, "rockpool.devices.xylo, entered bare by spikec (samna is not installed)")
    module.__path__ = [os.path.join(os.path.dirname(devices.__file__), "xylo")]
    module.__package__ = PACKAGE
    module.__spikec_shim__ = True
    sys.modules[PACKAGE] = module


def import_xylosim(module: str = f"{PACKAGE}.syns61201.xylo_sim"):
    """``module``'s ``XyloSim`` (Xylo Audio 2's by default; every one is backed by ``xylosim.v2``)."""
    if PACKAGE not in sys.modules and importlib.util.find_spec("samna") is None:
        _bare_package()
    return importlib.import_module(module).XyloSim


def shimmed() -> bool:
    """Whether ``rockpool.devices.xylo`` was entered bare (samna missing)."""
    return bool(getattr(sys.modules.get(PACKAGE), "__spikec_shim__", False))
