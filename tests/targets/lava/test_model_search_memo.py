"""The warm runner's memoized ProcessModel search (``_shim.memoize_model_search``) answers as Lava's own search.

Run in a fresh interpreter: the memo replaces a Lava class attribute for the life of the process, and this test
process's Lava must stay as Lava made it. For every Process type the runner builds, the memoized search returns
the same ProcessModel classes (by name and tags) as Lava's own, unmemoized search, and a second search of a
type executes no module (the memo answers).
"""
import json
import subprocess
import sys

import pytest

from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")

SCRIPT = r"""
import json
import importlib.util
from spikec.targets.lava._shim import import_lava, memoize_model_search
import_lava()
from lava.magma.compiler.compiler_graphs import ProcGroupDiGraphs
from spikec.targets.lava.runner import _built_types

def names(models):
    return sorted(f"{m.__module__}.{m.__qualname__}:{sorted(getattr(m, 'tags', []))}" for m in models)

types = _built_types()
lava_own = {}
for cls in types:
    probe = object.__new__(cls)
    probe._runtime = None
    lava_own[cls.__qualname__] = names(ProcGroupDiGraphs._find_proc_models(probe))
memoize_model_search(types)
execs = []
real = importlib.util.spec_from_file_location
importlib.util.spec_from_file_location = lambda *a, **k: execs.append(a[0]) or real(*a, **k)
memoized = {}
for cls in types:
    probe = object.__new__(cls)
    probe._runtime = None
    memoized[cls.__qualname__] = names(ProcGroupDiGraphs._find_proc_models(probe))
print(json.dumps({"lava": lava_own, "memo": memoized, "execs": len(execs),
                  "memo_size": len(ProcGroupDiGraphs._find_proc_models.memo)}))
"""


def test_memoized_search_matches_lavas_own_and_searches_once():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(got["lava"]) >= {"LIF", "Dense", "DelayDense", "Conv", "RingBuffer", "Monitor", "SpikecAND"}
    assert all(got["lava"][k] for k in got["lava"]), f"a type with no ProcessModel: {got['lava']}"
    assert got["memo"] == got["lava"]
    assert got["memo_size"] == len(got["lava"])
    assert got["execs"] == 0, "the memoized search executed modules again"
