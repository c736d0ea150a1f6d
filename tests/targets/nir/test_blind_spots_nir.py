"""NIR CubaLIF read as snnTorch's Synaptic / RSynaptic (``spikec/formats/nir/cuba.py``), driven with the parameters
that trigger each rule: a decay of exactly 0 (tau = dt) is Synaptic's, a leak, a negative threshold are not, and a
feedback Linear that another node also reads is no RSynaptic recurrence. On the NIR paper's Braille RNN file."""
from pathlib import Path

import numpy as np
import pytest

nir = pytest.importorskip("nir")

from spikec.ir.errors import UnsupportedOp  # noqa: E402
from spikec.frontend.nir_file import DT, load_nir  # noqa: E402

PAPER = Path(__file__).resolve().parents[2] / "fixtures" / "nir_paper" / "braille_noDelay_noBias_subtract.nir"


def _ops(g):
    return {n.name: n.op for n in g.nodes}


def _read(**lif2):
    g = nir.read(PAPER)
    node = g.nodes["lif2"]
    for k, v in lif2.items():
        setattr(node, k, np.full(np.shape(getattr(node, k)) or (7,), v, dtype=np.float64))
    return load_nir(g, DT)


def test_the_plain_file_reads_lif2_as_synaptic():
    assert _ops(_read())["lif2"] == "synaptic_snntorch"


def test_a_decay_of_exactly_zero_is_still_synaptic():
    """tau_syn = dt: the current keeps 1 - dt/tau = 0 of itself each step; Synaptic clamps its decays to [0, 1],
    so alpha = 0 is its own (a memoryless current), not a misfit."""
    g = _read(tau_syn=DT)
    (n,) = [n for n in g.nodes if n.name == "lif2"]
    assert n.op == "synaptic_snntorch" and float(np.max(n.params["alpha"])) == 0.0


@pytest.mark.parametrize("param,value", [("v_leak", 0.25), ("v_threshold", -0.5)])
def test_a_leak_or_a_negative_threshold_is_not_synaptic(param, value):
    ops = _ops(_read(**{param: value}))
    assert ops.get("lif2") != "synaptic_snntorch" and "synaptic_snntorch" not in {
        op for name, op in ops.items() if name.startswith("lif2")}


def test_a_feedback_linear_read_by_another_node_is_refused_naming_why():
    g = nir.read(PAPER)
    g.edges.append(("lif1.w_rec", "fc2"))   # fc2 now reads the feedback too: it is no private recurrence
    with pytest.raises(UnsupportedOp) as e:
        load_nir(g, DT)
    assert "lif1.w_rec" in e.value.what and "read by it alone" in e.value.what


def test_a_recurrent_cubalif_with_two_feed_forward_inputs_is_refused_naming_why():
    g = nir.read(PAPER)
    fc1 = g.nodes["fc1"]
    g.nodes["fc1b"] = nir.Linear(weight=np.asarray(fc1.weight) * 0.5)
    g.edges.extend([("input", "fc1b"), ("fc1b", "lif1.lif")])
    with pytest.raises(UnsupportedOp) as e:
        load_nir(g, DT)
    assert "2 feed-forward inputs" in e.value.what
