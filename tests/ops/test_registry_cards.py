"""The card facts that span layers (``OpDef.decay``, ``state``, ``threshold_margin``, ``neuron``) and their live
view ``facts``: derived from the cards, they must say what the layers reading them do."""
import numpy as np
import pytest

import spikec.frontend  # noqa: F401  (the converters' framework-exact ops)
import spikec.targets.lava.ops  # noqa: F401  (the Lava target's integer ops)
import spikec.codings.ttfs  # noqa: F401  (the TTFS coding's ops)
from spikec.ir.errors import IRError, UnsupportedOp
from spikec.ir.graph import Node, TensorType
from spikec.ops import OPS, Decay, decay_params, define, facts


@pytest.fixture
def scratch_op():
    names = []

    def make(name, **kw):
        names.append(name)
        return define(name, 1, lambda n, i: i[0], **kw)
    yield make
    for n in names:
        OPS.pop(n, None)


def test_a_fact_view_is_live_and_holds_only_ops_that_have_the_fact(scratch_op):
    states, decays = facts("state"), facts("decay")
    assert "scratch_cards_op" not in states and "linear" not in states and states["lif"] == ("h",)
    scratch_op("scratch_cards_op", stateful=True, state=("z",), decay=decay_params("k"))
    assert states["scratch_cards_op"] == ("z",) and "scratch_cards_op" in decays.keys()
    assert len(states) == len(list(states)) == sum(1 for d in OPS.values() if d.state)
    OPS.pop("scratch_cards_op")
    assert "scratch_cards_op" not in states and states.get("scratch_cards_op") is None
    with pytest.raises(KeyError):
        states["linear"]


def test_an_unknown_fact_is_refused_by_name():
    with pytest.raises(IRError, match="no card fact 'decays'"):
        facts("decays")


def test_decay_params_reads_the_parameters_a_node_holds():
    node = Node("n", "lif", ("x",), TensorType((2,), "binary"), {}, {"beta": np.array([0.5, 2.0])})
    rule = decay_params("alpha", "beta", zero_ok=True)
    assert isinstance(rule, Decay) and rule.zero_ok
    (label, values), = rule.of(node)
    assert label == "beta" and values.dtype == np.float64 and values.tolist() == [0.5, 2.0]


def test_the_facts_are_on_the_neurons_that_had_them_in_private_lists():
    """Before the cards held them these were lists in vacuity.py (DECAYS), html_raster.py (MEMBRANE_OPS) and
    onnx/streaming.py (STEP_FORMS): each derived set holds at least those ops."""
    assert {"lif", "intfire", "intfire_unrolled", "silif", "csilif", "lif_snntorch", "synaptic_snntorch",
            "rleaky_snntorch", "alpha_snntorch", "lif_sj", "lif_norse", "li_norse", "sdna_pairwise"} == set(facts("decay"))
    assert {"lif", "silif", "csilif", "lif_snntorch", "synaptic_snntorch", "rleaky_snntorch", "lif_sj", "lif_norse",
            "qif_sj", "eif_sj", "izhikevich_sj", "lif_sinabs"} == set(facts("threshold_margin"))
    assert set(facts("threshold_margin")) <= set(facts("neuron")) and "li_norse" not in facts("neuron")


def _state_vars(op: str, graphs) -> set[str]:
    """The state variables the one-step ONNX model of each graph carries for the nodes of ``op``."""
    from spikec.targets.onnx.streaming import export_step
    found = set()
    for graph in graphs:
        _, init = export_step(graph)
        ops = {n.name: n.op for n in graph.nodes}
        for name in init:
            node, var = name[len("state."):].rsplit(".", 1)
            if ops[node] == op:
                found.add(var)
    return found


STREAMED = sorted(op for op in facts("state"))


@pytest.mark.parametrize("op", STREAMED)
def test_a_card_state_names_the_variables_its_step_form_carries(op):
    """ONNX streaming derives which ops stream from ``state``: the card must name what the emitter carries, on
    the op's coverage example and each of its variants."""
    from spikec.targets.coverage_examples import EXAMPLES, VARIANTS
    builders = [EXAMPLES[op]] + list(VARIANTS.get(op, {}).values())
    found = _state_vars(op, [build()[0] for build in builders])
    assert found and found <= set(OPS[op].state), (found, OPS[op].state)


def test_a_stateful_op_without_a_state_has_no_step_form():
    from spikec.targets.coverage_examples import EXAMPLES
    from spikec.targets.onnx.streaming import export_step
    graph, _ = EXAMPLES["time_sum"]()
    assert OPS["time_sum"].stateful and not OPS["time_sum"].state
    with pytest.raises(UnsupportedOp, match="time_sum has no one-step ONNX form"):
        export_step(graph)
