"""spikec's TTFS Lava Process and its fixed_pt ProcessModel, alone in this package.

Lava's model discovery imports every ``.py`` file in the folder of a Process's module, so this folder holds
only Lava process code: ``process.py`` (``SpikecTTFS``) and ``models.py`` (its ProcessModel). Import it only
after ``spikec.targets.lava._shim.import_lava()``. The mapping is ``spikec.targets.lava.ttfs``.
"""
