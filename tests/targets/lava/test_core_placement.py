"""Core placement (spikec/targets/lava/cores): every neuron on exactly one core, every per-core and per-chip limit
held, the traffic model checked against torch's own convolution, METIS against the greedy per-layer split on a
multi-chip case, deterministic output, and a named error when pymetis is missing.

The split is a placement plan, not an IR rewrite (the IR and the Lava network are unchanged), so what is proved
is the plan's coverage and limits, against an independent count of the deployment's synapses and axons.
"""
import importlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from spikec.ir.errors import BadInput
from spikec.targets.lava import chip_limits
from spikec.targets.lava.chip_limits import Limits
from spikec.targets.lava.cores import plan_placement, populations
from spikec.targets.lava.cores.network import Population, Stream
from spikec.targets.lava.cores.split import split
from spikec.targets.lava.cores.traffic import axons_in, reach, traffic

MODELS = Path(__file__).with_name("models.py")
SMALL = Limits(neurons_per_core=24, synapses_per_core=900, cores_per_chip=4, axons_in_per_core=120, name="tiny")


@pytest.fixture(scope="module")
def deployed():
    """conv_mixed (stride, padding, dilation, groups, a flattened dense head) quantized and lowered for Lava, and
    its integer reference's run on random spikes."""
    import spikec
    from spikec.core.interpreter import run
    from spikec.targets.lava import deploy
    from spikec.targets.lava.limits import int_inputs
    from spikec.targets.lava.ops import with_readouts
    spec = importlib.util.spec_from_file_location("lava_models", MODELS)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    c = spikec.compile(m.conv_mixed(), batch=2, targets="none", probes=False)
    x = (np.random.default_rng(3).random((12, 2, 2, 9, 7)) < 0.4).astype(np.float64)
    q, net, arrays = deploy(c.graph, x)
    values = run(with_readouts(q.graph), int_inputs(q.graph, x), integer=True).values
    return net, arrays, values


def _torch_reach(s: Stream, out_shape, channels, positions) -> np.ndarray:
    """The source neurons a block of a conv's output depends on, by autograd through torch's conv2d."""
    x = torch.ones((1, *s.source_shape), dtype=torch.float64, requires_grad=True)
    w = torch.tensor((s.weight != 0).astype(np.float64))
    y = torch.nn.functional.conv2d(x, w, stride=s.stride, padding=s.padding, dilation=s.dilation, groups=s.groups)
    mask = torch.zeros(out_shape, dtype=torch.float64)
    mask.view(out_shape[0], -1)[channels[0]:channels[1], positions[0]:positions[1]] = 1
    (y[0] * mask).sum().backward()
    return (x.grad[0] != 0).numpy().reshape(s.source_shape[0], -1)


def _torch_synapses(s: Stream, out_shape) -> np.ndarray:
    """In-bounds nonzero synapses of every output neuron of a conv, by torch's conv2d over ones."""
    x = torch.ones((1, *s.source_shape), dtype=torch.float64)
    w = torch.tensor((s.weight != 0).astype(np.float64))
    y = torch.nn.functional.conv2d(x, w, stride=s.stride, padding=s.padding, dilation=s.dilation, groups=s.groups)
    return y[0].numpy().reshape(out_shape[0], -1)


def test_the_deployment_has_the_structure_under_test(deployed):
    pops = populations(*deployed[:2])
    kinds = {s.kind for p in pops for s in p.streams}
    assert kinds == {"conv", "dense"} and any(s.groups > 1 for p in pops for s in p.streams)
    assert any(s.source is None for p in pops for s in p.streams)   # the first conv reads the graph input


def test_every_neuron_on_exactly_one_core_within_every_limit(deployed):
    net, arrays, values = deployed
    plan = plan_placement((net, arrays), values, SMALL)
    doc = json.loads(json.dumps(plan.to_json()))
    assert doc["chips"] > 1 and doc["cores"] == len(doc["assignment"])
    by_pop = {p.name: p for p in plan.populations}
    seen = {name: np.zeros(p.grid, dtype=int) for name, p in by_pop.items()}
    for core in doc["assignment"]:
        (c0, c1), (p0, p1) = core["channels"], core["positions"]
        seen[core["population"]][c0:c1, p0:p1] += 1
        pop = by_pop[core["population"]]
        exact = sum(_torch_synapses(s, pop.shape)[c0:c1, p0:p1].sum() if s.kind == "conv" else
                    (s.weight != 0).sum(1).reshape(pop.grid)[c0:c1, p0:p1].sum() for s in pop.streams)
        assert core["neurons"] == (c1 - c0) * (p1 - p0) <= SMALL.neurons_per_core
        assert exact <= core["synapses"] <= SMALL.synapses_per_core   # an upper bound of the real count
        assert core["axons_in"] <= SMALL.axons_in_per_core
    assert all((s == 1).all() for s in seen.values())
    assert len({c["core"] for c in doc["assignment"]}) == len(doc["assignment"])
    per_chip = np.bincount([c["chip"] for c in doc["assignment"]])
    assert per_chip.max() <= SMALL.cores_per_chip and doc["chips"] == len(per_chip)


def test_reach_and_axons_agree_with_torch_autograd(deployed):
    pops = populations(*deployed[:2])
    checked = 0
    for pop in pops:
        for s in pop.streams:
            if s.kind != "conv":
                continue
            for pc in split(pop, SMALL, axons_in):
                assert np.array_equal(reach(pop, s, pc.channels, pc.positions),
                                      _torch_reach(s, pop.shape, pc.channels, pc.positions))
                checked += 1
    assert checked >= 4


def test_traffic_is_the_spikes_of_the_source_neurons_reaching_each_core(deployed):
    net, arrays, values = deployed
    pops = populations(net, arrays)
    plan = plan_placement((net, arrays), values, SMALL)
    pieces = list(plan.pieces)
    flows = traffic(pops, pieces, {p.name: (np.asarray(values[p.name]) != 0).reshape(12, 2, -1).sum(0).mean(0)
                                   .reshape(p.grid) for p in pops})
    target = next(p for p in pops if any(s.kind == "conv" and s.source for s in p.streams))
    s = next(s for s in target.streams if s.source)
    spikes = (np.asarray(values[s.source]) != 0).sum(0).mean(0).reshape(s.source_shape[0], -1)
    for b, pb in enumerate(pieces):
        if pb.population != target.name:
            continue
        needed = _torch_reach(s, target.shape, pb.channels, pb.positions)
        for a, pa in enumerate(pieces):
            if pa.population == s.source:
                (c0, c1), (p0, p1) = pa.channels, pa.positions
                assert flows.get((a, b), 0.0) == pytest.approx((spikes * needed)[c0:c1, p0:p1].sum())
    total = plan.traffic
    assert total["total"] == pytest.approx(sum(flows.values()), rel=1e-9)
    assert total["intra_core"] + total["inter_core_same_chip"] + total["inter_chip"] == pytest.approx(total["total"])


def _chains() -> tuple[list, dict]:
    """Two independent chains of dense populations, interleaved in network order (a1 b1 a2 b2 ...): the greedy
    per-layer fill puts both chains on every chip, a partition puts one chain per chip."""
    rng = np.random.default_rng(0)
    pops, counts = [], {}
    for i in range(6):
        for chain in "ab":
            src = f"{chain}{i - 1}" if i else None
            w = (rng.random((8, 8)) < 0.5).astype(float)
            pops.append(Population(f"{chain}{i}", "LIF", (8,), (Stream(f"{chain}{i}.syn", src, (8,), "dense", w),)))
            counts[f"{chain}{i}"] = rng.integers(1, 5, size=8).astype(float)
    return pops, counts


def test_planned_no_more_cores_and_less_inter_chip_traffic_than_greedy():
    pops, counts = _chains()
    lim = Limits(neurons_per_core=4, synapses_per_core=64, cores_per_chip=12, name="tiny")
    plan = plan_placement(pops, counts, lim)
    assert plan.chips == plan.greedy["chips"] == 2
    assert plan.cores <= plan.greedy["cores"]
    assert plan.traffic["inter_chip"] < plan.greedy["traffic"]["inter_chip"]
    assert plan.traffic["total"] == pytest.approx(plan.greedy["traffic"]["total"])


def test_placement_is_deterministic(deployed):
    net, arrays, values = deployed
    docs = [json.dumps(plan_placement((net, arrays), values, SMALL).to_json(), sort_keys=True) for _ in range(2)]
    assert docs[0] == docs[1]


def test_missing_pymetis_is_a_named_error(monkeypatch):
    pops, counts = _chains()
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(BadInput, match="pymetis") as e:
        plan_placement(pops, counts, Limits(neurons_per_core=8, synapses_per_core=64, cores_per_chip=4))
    assert "pip install pymetis" in e.value.remedy


def test_a_neuron_over_a_core_is_refused_by_name():
    pops, counts = _chains()
    with pytest.raises(BadInput, match="synapses"):
        plan_placement(pops, counts, Limits(neurons_per_core=8, synapses_per_core=2, cores_per_chip=4))


def test_one_table_of_limits_with_sources():
    resources = importlib.import_module("spikec.targets.lava.resources")   # the package exports a function so named
    assert all(row["source"] for row in chip_limits.table())
    assert (resources.NEURONS_PER_CORE, resources.SYNAPSES_PER_CORE, resources.CORES_PER_CHIP) == \
        (chip_limits.LOIHI2.neurons_per_core, chip_limits.LOIHI2.synapses_per_core, 128)
    assert chip_limits.LOIHI2.neurons_per_core * 128 == 2 ** 20


def test_the_written_document_checks_and_a_tampered_one_does_not(deployed):
    from spikec.targets.lava.cores import check_document, for_deployment
    net, arrays, values = deployed
    entry, doc = for_deployment(net, arrays, values, SMALL)
    doc = json.loads(json.dumps(doc))
    check = lambda d: check_document(d, net, arrays, SMALL)
    assert entry["planned"] and entry["cores"] == len(doc["assignment"]) and check(doc) == []
    twice = json.loads(json.dumps(doc))
    twice["assignment"][1] = dict(twice["assignment"][0], core=twice["assignment"][1]["core"])
    assert any("on several" in m for m in check(twice))
    crowded = json.loads(json.dumps(doc))
    for c in crowded["assignment"]:
        c["chip"] = 0
    assert any("cores over" in m for m in check(crowded))
    # the file's own limits and counts are not believed: a raised limit and understated synapses are both found
    lied = json.loads(json.dumps(doc))
    lied["limits"]["synapses_per_core"] = 10 ** 9
    lied["assignment"][0]["synapses"] = 0
    assert any("the file says 0 synapses" in m for m in check(lied))
    assert check({"limits": {}})[0].startswith("placement.json is not")


def test_a_deployment_that_cannot_be_placed_is_reported_not_raised(deployed):
    from spikec.targets.lava.cores import for_deployment
    net, arrays, values = deployed
    entry, doc = for_deployment(net, arrays, values, Limits(neurons_per_core=4, synapses_per_core=3))
    assert entry["planned"] is False and doc is None and "synapses" in entry["why"] and entry["remedy"]
