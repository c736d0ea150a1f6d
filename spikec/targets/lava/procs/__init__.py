"""spikec's custom Lava Processes and their fixed_pt ProcessModels, alone in this package.

Lava's model discovery imports every ``.py`` file in the folder of a Process's module, so this
folder holds only Lava process code: ``process.py`` (Processes) and ``models.py`` (ProcessModels).
Import it only after ``spikec.targets.lava._shim.import_lava()``.
"""
