"""Sinabs's multi-spike neurons on Lava (``spikec/targets/lava/sinabs_counts.py``): ``IAF`` / ``LIF`` with
``MaxSpike(n)`` and the subtract reset are spikec's ``intfire`` (floor rounding, counts 0..n) and run bit-exact in
Lava's fixed-point simulation as SpikecIntFire with graded payloads; ``MultiSpike`` is ``MaxSpike(bound)`` where
its input has a static bound (binary inputs through Linear layers), else refused by name with the count the
verification inputs reach and the remedy; a threshold whose multiples Sinabs's
float32 product would round stays ``lif_sinabs`` (refused by the mapping)."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec  # noqa: F401  (the package first, then its Sinabs frontend)
from spikec.frontend import sinabs as frontend  # before Sinabs: it lets Sinabs import without matplotlib
from spikec.targets.lava import lava_available, sinabs_counts

sinabs = pytest.importorskip("sinabs")
import sinabs.layers as sl  # noqa: E402
from sinabs.activation import MaxSpike, MultiSpike  # noqa: E402

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


def _net(fn, theta1=0.5, theta2=0.25):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 10), sl.IAF(spike_fn=fn, spike_threshold=torch.tensor(theta1)),
                      nn.Linear(10, 6), sl.LIF(tau_mem=4.0, norm_input=False, spike_fn=fn,
                                               spike_threshold=torch.tensor(theta2)))
    with torch.no_grad():
        for layer in m:
            if isinstance(layer, nn.Linear):
                layer.weight.mul_(2.0)
    return frontend.SinabsNet(m)


def _x():
    return (np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64)


@needs_lava
def test_maxspike_neurons_are_bit_exact_on_lava_with_graded_counts():
    # lava_reset='subtract': spikec's carry-free processes (the default is a count ladder: test_count_ladder.py)
    c = spikec.compile(_net(MaxSpike(3)), _x(), targets=("lava",), lava_reset="subtract")
    t = c.targets["lava"]
    assert c.equivalent   # the traced graph against Sinabs's own forward
    assert t["bit_exact"] is True, t["first_mismatches"]
    assert t["quantization_checks"]["ok"], t["quantization_checks"]["failures"]
    assert t["products"]["rewrite_check"]["equivalent"] is True
    assert [n.op for n in c.graph.nodes].count("lif_sinabs") == 2
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert kinds["model.net.1"] == kinds["model.net.3"] == "SpikecIntFire"
    assert t["graded_payloads_compared"] == t["spikes_compared"] > 0
    y = c.run(_x())   # several spikes per step occur, and silence
    assert y.max() > 1 and (y == 0).any()
    assert sum("MaxSpike(3)" in r["as"] for r in t["products"]["rewrites"]) == 2


@needs_lava
def test_multispike_with_a_static_bound_is_maxspike_of_the_bound_and_bit_exact():
    """Binary inputs through Linear layers: the count of each MultiSpike neuron has a bound from the weights, so it
    is MaxSpike(bound) on every input; deployed bit-exact, the counts Sinabs itself produces within the bound."""
    c = spikec.compile(_net(MultiSpike), _x(), targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    assert t["products"]["rewrite_check"]["equivalent"] is True
    bounds = [int(r["as"].split("at most ")[1].split()[0]) for r in t["products"]["rewrites"] if "MultiSpike" in r["as"]]
    assert len(bounds) == 2 and all(b >= 1 for b in bounds)
    from spikec.frontend import trace
    graph = trace(_net(MultiSpike), (12,))
    ranges = sinabs_counts.value_ranges(graph)
    for n, b in zip([n for n in graph.nodes if n.op == "lif_sinabs"], bounds):
        assert sinabs_counts.count_bound(n, ranges[n.inputs[0]]) == b


def test_the_count_bound_holds_on_sinabs_own_module_for_any_input():
    """Sinabs's own IAF (MultiSpike) on random binary inputs and the strongest excitation: its count never exceeds
    ``count_bound`` of its input's static range, and the all-ones input comes within one of it."""
    torch.manual_seed(1)
    lin = nn.Linear(12, 10)
    with torch.no_grad():
        lin.weight.abs_().mul_(3.0)   # all excitatory: the all-ones input reaches the largest input, every step
    iaf = sl.IAF(spike_fn=MultiSpike, spike_threshold=torch.tensor(0.5))
    w, b = lin.weight.detach().double().numpy(), lin.bias.detach().double().numpy()
    hi = float((b + w.sum(1)).max())
    from spikec.ir.graph import Node, TensorType
    node = Node("n", "lif_sinabs", ("x",), TensorType((10,)), {"norm_input": False, "spike": "multi",
                                                              "reset": "subtract"},
                {"alpha_mem": np.asarray(1.0), "threshold": np.asarray(0.5)})
    bound = sinabs_counts.count_bound(node, (-1.0, hi))
    assert bound == int(np.floor(1 + hi / 0.5 + 1e-6))
    rng = np.random.default_rng(0)
    xs = [rng.random((40, 1, 12)) < p for p in (0.2, 0.5, 0.9)] + [np.ones((40, 1, 12), bool)]
    peak = 0
    for x in xs:
        iaf.reset_states()
        with torch.no_grad():
            out = iaf(lin(torch.as_tensor(x, dtype=torch.float32).reshape(40, 12)).reshape(1, 40, 10))
        peak = max(peak, int(out.max()))
    assert 1 <= peak <= bound and peak >= bound - 1   # never beyond, and tight within one


def test_without_a_static_bound_multispike_is_refused_naming_why():
    from spikec.ir.errors import UnsupportedOp
    from spikec.core.interpreter import run
    from spikec.frontend import trace
    graph = trace(_net(MultiSpike), (12,), input_kind="real")   # real-valued inputs: no static bound
    x = _x() * 3
    with pytest.raises(UnsupportedOp, match="no static bound"):
        sinabs_counts.refuse_unbounded(graph, x, run(graph, x))
    assert sinabs_counts.value_ranges(graph)["model.net.1"] is None


def test_refusal_names_the_count_and_the_remedy():
    from spikec.ir.errors import UnsupportedOp
    from spikec.core.interpreter import run
    from spikec.frontend import trace
    graph = trace(_net(MultiSpike), (12,), input_kind="real")   # no static bound: refused
    x = _x() * 3
    ref = run(graph, x)
    peak = int(ref.values["model.net.1"].max())
    with pytest.raises(UnsupportedOp) as e:
        sinabs_counts.refuse_unbounded(graph, x, ref)
    assert f"count reaches {peak}" in str(e.value) and f"MaxSpike(n) with n >= {peak}" in e.value.remedy


def test_only_float32_exact_thresholds_become_intfire():
    from spikec.frontend import trace
    assert sinabs_counts._float32_exact(0.5, 7) and sinabs_counts._float32_exact(0.25, 100)
    third = float(np.float32(1 / 3))
    assert not sinabs_counts._float32_exact(third, 3)   # 3 * float32(1/3) is not a float32 number
    exact = trace(_net(MaxSpike(3)), (12,))
    inexact = trace(_net(MaxSpike(3), theta1=third), (12,))
    assert [sinabs_counts.exact_intfire(n) for n in exact.nodes if n.op == "lif_sinabs"] == [True, True]
    assert [sinabs_counts.exact_intfire(n) for n in inexact.nodes if n.op == "lif_sinabs"] == [False, True]
    lowered, records = sinabs_counts.lower(inexact)
    assert [n.op for n in lowered.nodes].count("lif_sinabs") == 1 and len(records) == 1


def _pooled_net():
    """As Sinabs's docs write a conv net: IAFSqueeze on [B T, C, H, W], SumPool2d between the layers."""
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), sl.IAFSqueeze(batch_size=2), sl.SumPool2d(2),
                         nn.Conv2d(4, 4, 3, padding=1, bias=False), sl.IAFSqueeze(batch_size=2))


@needs_lava
def test_sinabs_sum_pool_folds_into_the_next_conv_bit_exact():
    """Sinabs's SumPool2d (an LPPool2d of norm 1: the average times the window, as traced) between MultiSpike IAFs
    and a conv is the window sum (a depthwise all-ones conv2d) folded into that conv: bit-exact on Lava."""
    x = (np.random.default_rng(2).random((4, 2, 2, 8, 8)) < 0.4).astype(np.float64)
    c = spikec.compile(_pooled_net(), x, stepping="multistep", targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    assert any("sum pool" in r["as"] for r in t["products"]["rewrites"])
    assert t["products"]["rewrite_check"]["equivalent"] is True


def test_an_average_times_other_than_its_window_is_no_sum_pool():
    from spikec.targets.lava import products
    x = (np.random.default_rng(2).random((4, 2, 2, 8, 8)) < 0.4).astype(np.float64)
    graph = spikec.compile(_pooled_net(), x, stepping="multistep").graph
    pool = next(n for n in graph.nodes if n.op == "avgpool2d")
    assert products._sum_pool_scale(graph, pool) is not None
    scale = graph.consumers(pool.name)[0]
    from spikec.ir.graph import Graph
    other = Graph(tuple(n.with_(attrs=dict(n.attrs, a=3.0)) if n.name == scale.name else n for n in graph.nodes),
                  graph.outputs, graph.meta)
    assert products._sum_pool_scale(other, pool) is None


def test_no_count_bound_where_the_membrane_is_not_below_theta_after_a_step():
    """The bound rests on ``v < theta`` after the subtract reset of ``theta`` applied to the synaptic input itself:
    a reset to a value, a smaller subtraction or a synaptic current gets none (so no rewrite, and a refusal)."""
    from spikec.ir.graph import Node, TensorType

    def node(attrs=None, **params):
        base = {"alpha_mem": np.asarray(1.0), "threshold": np.asarray(0.5)}
        return Node("n", "lif_sinabs", ("x",), TensorType((4,)),
                    {"norm_input": False, "spike": "multi", "reset": "subtract", **(attrs or {})}, {**base, **params})

    assert sinabs_counts.count_bound(node(), (0.0, 1.2)) == 3   # floor(1 + 1.2 / 0.5)
    assert sinabs_counts.count_bound(node({"reset": "reset"}, reset_value=np.asarray(0.7)), (0.0, 1.2)) is None
    assert sinabs_counts.count_bound(node(subtract=np.asarray(0.25)), (0.0, 1.2)) is None
    assert sinabs_counts.count_bound(node(alpha_syn=np.asarray(0.5)), (0.0, 1.2)) is None
    assert sinabs_counts.count_bound(node(), None) is None



@needs_lava
def test_a_clamped_membrane_deploys_bit_exact_as_spikec_intfire_and_says_why_not_a_ladder():
    """``sinabs.from_model``'s default ``min_v_mem=-1``: intfire with ``v_min``, the rewrite proven, bit-exact in
    Lava as SpikecIntFire (Lava's LIF has no lower clamp: the chip blocker names min_v_mem and its remedy)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 10), sl.IAF(min_v_mem=-1.0), nn.Linear(10, 6), sl.IAF(min_v_mem=-1.0))
    with torch.no_grad():
        m[0].weight.mul_(2.0)
    x = _x()
    c = spikec.compile(frontend.SinabsNet(m), x, targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    assert t["products"]["rewrite_check"]["equivalent"] is True
    procs = {p["name"]: p for p in t["processes"]}
    assert procs["model.net.1"]["type"] == "SpikecIntFire"
    blocker = next(b for b in t["chip_readiness"]["blocking"] if b["name"] == "model.net.1")
    assert "min_v_mem" in blocker["why"]
    layer = t["quantization"]["layers"]["model.net.1"]
    np.testing.assert_array_equal(layer["v_min"], np.round(-64 * np.asarray(layer["scale"])))   # 64 s v_min
    from spikec.core.interpreter import run
    free = spikec.compile(frontend.SinabsNet(nn.Sequential(m[0], sl.IAF(), m[2], sl.IAF())), x, targets=())
    clamped, unclamped = (run(k.graph, x).values["model.net.1"] for k in (c, free))
    assert not np.array_equal(clamped, unclamped)   # the clamp acts on these inputs


@needs_lava
def test_the_chip_ready_variant_drops_the_membrane_floor_and_measures_it():
    """``lava_reset='zero'``: the nearest chip-ready variant drops ``min_v_mem`` so that the counts are ladders of
    Lava's LIF; its disagreement with the given network measured, the compile never called equivalent."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 10), sl.IAF(min_v_mem=-1.0), nn.Linear(10, 6), sl.IAF(min_v_mem=-1.0))
    with torch.no_grad():
        m[0].weight.mul_(2.0)
    c = spikec.compile(frontend.SinabsNet(m), _x(), targets=("lava",), lava_reset="zero")
    t = c.targets["lava"]
    v = t["approximate_variant"]
    assert sorted(v["floors_dropped"]) == ["model.net.1", "model.net.3"] and v["approximate"] is True
    assert 0 < v["per_neuron"]["model.net.1"]["spike_agreement"] <= 1
    assert t["bit_exact"] is True and not c.equivalent
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert kinds["model.net.1"] == "LIF" and "model.net.1" in t["count_ladders"]["populations"]
    assert "membrane floor(s) (min_v_mem) dropped" in t["summary"]


def test_a_single_spike_with_a_floor_is_intfire_of_one():
    """SingleSpike with min_v_mem (what the frontend's lif lacks) is MaxSpike(1): intfire(1) with v_min, the same
    function on Sinabs's own module's inputs (the rewrite is proven in the float graph)."""
    from spikec.core.interpreter import run
    from spikec.frontend import trace
    from sinabs.activation import SingleSpike
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 10), sl.IAF(spike_fn=SingleSpike, min_v_mem=-1.0))
    with torch.no_grad():
        m[0].weight.mul_(2.0)
    graph = trace(frontend.SinabsNet(m), (12,))
    lowered, records = sinabs_counts.lower(graph)
    n = lowered.node("model.net.1")
    assert n.op == "intfire" and n.attrs["max_spikes"] == 1 and float(n.params["v_min"]) == -1.0
    assert "SingleSpike" in records[0]["as"] and "min_v_mem floor as v_min" in records[0]["as"]
    x = _x()
    np.testing.assert_array_equal(run(graph, x).values["model.net.1"], run(lowered, x).values["model.net.1"])


def _odd_net(padding=0, head="linear"):
    """Sinabs's N-MNIST shape on an odd map: a SumPool2d(2) on 7 x 7 leaves out the last row and column (floor), then
    a Linear (after Flatten) or a conv."""
    torch.manual_seed(4)
    tail = [nn.Flatten(), nn.Linear(4 * 3 * 3, 5, bias=False)] if head == "linear" else \
        [nn.Conv2d(4, 3, 2, padding=padding, bias=False)]
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), sl.IAFSqueeze(batch_size=2), sl.SumPool2d(2),
                         *tail, sl.IAFSqueeze(batch_size=2))


@needs_lava
@pytest.mark.parametrize("head", ["linear", "conv"])
def test_a_sum_pool_that_does_not_tile_folds_bit_exact(head):
    """The rows and columns a floor-mode pool leaves out get no weight in the folded Dense; an unpadded conv's folded
    windows never reach them. Bit-exact on Lava, and the dropped row does fire (it is no trivial case)."""
    x = (np.random.default_rng(5).random((4, 2, 2, 7, 7)) < 0.5).astype(np.float64)
    c = spikec.compile(_odd_net(head=head), x, stepping="multistep", targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    first = next(n for n in c.graph.nodes if n.op in ("lif", "lif_sinabs", "intfire"))
    from spikec.core.interpreter import run
    spikes = run(c.graph, x).values[first.name]
    assert spikes[..., 6, :].sum() > 0 and spikes[..., :, 6].sum() > 0   # the left-out row and column fire


def test_a_sum_pool_that_does_not_tile_before_a_padded_conv_is_refused_by_name():
    x = (np.random.default_rng(5).random((4, 2, 2, 7, 7)) < 0.5).astype(np.float64)
    c = spikec.compile(_odd_net(padding=1, head="conv"), x, stepping="multistep", targets=("lava",))
    text = str(c.targets["lava"])
    assert "leaves out the last 1 row(s) and 1 column(s) of its 7x7 map" in text and "conv without padding" in text
