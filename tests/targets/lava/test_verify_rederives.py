"""``verify_lava`` derives lava/quantized again from graph.json: a consistently rewritten deployment fails.

A deployment whose integer reference and network were both changed together (a weight rescaled and
the network lowered again from it) is self-consistent: Lava reproduces it bit for bit. Only deriving the
integer reference again from the deployed float graph shows it is not what spikec compiled.
"""
import numpy as np
import pytest

from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


def test_a_consistent_rewrite_of_the_deployment_is_caught(tmp_path):
    from test_lava_target import compile_fixture
    from spikec.app.driver import write_outdir
    from spikec.core.serialize import save_graph
    from spikec.targets.lava import load_deployed, verify_lava
    from spikec.targets.lava.lower import lower, save_network
    c = compile_fixture("dense_soft", seed=9)
    out = write_outdir(tmp_path / "out", c)
    x = np.load(out / "io.npz")["input"]
    good = verify_lava(out, c.graph, x, None)
    assert good["equivalent"] and good["quantized_rederived"]["equal"] is True

    q, _, _ = load_deployed(out)
    node = next(n for n in q.nodes if "weight" in n.params)
    w = node.params["weight"].copy()
    small = np.where(w != 0, np.abs(w), np.iinfo(np.int64).max)
    i = np.unravel_index(np.argmin(small), w.shape)        # a small weight: +-2 stays on Lava's grid and range
    w[i] += 2 * np.sign(w[i])
    bumped = {**node.params, "weight": w}
    q = q.with_nodes(tuple(n.with_(params=bumped) if n.name == node.name else n for n in q.nodes))
    save_graph(q, out / "lava" / "quantized")
    save_network(*lower(q), out / "lava")
    bad = verify_lava(out, c.graph, x, None)
    assert not bad["arrays_differing_from_lowering"]          # the network is the lowering of the rewritten q
    assert bad["quantized_rederived"] == {"equal": False, "differing_nodes": [node.name]}
    assert not bad["equivalent"]

    other = verify_lava(out, c.graph, x[:, :1], None)         # other inputs: calibration differs, said so
    assert other["quantized_rederived"]["equal"] is None and "calibration" in other["quantized_rederived"]["skipped"]
