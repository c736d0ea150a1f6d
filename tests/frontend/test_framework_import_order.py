"""The frameworks' converters register when first looked up (``spikec.frontend.registry.on_framework``), whatever
the order the user's script imports the framework and spikec in."""
import subprocess
import sys

import pytest

pytest.importorskip("sinabs")


def test_sinabs_imported_before_spikec_registers_its_converters():
    """A user's script imports Sinabs first: spikec's Sinabs registrations run when first looked up, not while
    ``spikec/frontend/sinabs.py`` is half executed (a NameError before)."""
    code = ("import sinabs.layers as sl, torch, spikec, numpy as np\n"
            "m = torch.nn.Sequential(torch.nn.Linear(4, 3), sl.IAFSqueeze(batch_size=2))\n"
            "c = spikec.compile(m, (np.random.default_rng(0).random((3, 2, 4)) < .5).astype('float32'), targets=())\n"
            "print(c.equivalent)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("True"), r.stderr[-2000:]
