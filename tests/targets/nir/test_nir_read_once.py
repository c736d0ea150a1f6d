"""The NIR target reads its file once and runs each consumer once: every consumer imports a copy of the graph
read, no import changes what the next consumer is given, and a file with several outputs is run once per
consumer where one of its one-output parts holds the others (snnTorch, Norse: the other outputs are read off that
run at the node each Output reads), with the verdicts of running each part alone.

Before, each consumer read the file again for its hooks and again for its import, and each one-output part was
written to a file, read back and run per consumer: 9 reads of ~36 ms (h5py) and 4 consumer runs for a two-output
file and two consumers, most of the target's cost (benchmarks/bench_nir.py). An snnTorch network with a membrane
output (``Leaky(output=True)``: spikes and membrane, two outputs) is compiled and checked as the driver does it.
"""
import copy

import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.core.interpreter import run
from spikec.formats.nir import hdf5
from spikec.targets.nir import consumers, nir_target

snntorch = pytest.importorskip("snntorch", reason="snnTorch 1.0.0 is a test dependency")


def _two_output_network():
    g = torch.Generator().manual_seed(3)
    net = nn.Sequential(nn.Linear(12, 8), snntorch.Leaky(beta=torch.full((8,), 0.9), init_hidden=True),
                        nn.Linear(8, 4), snntorch.Leaky(beta=torch.full((4,), 0.8), init_hidden=True, output=True))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * 0.6)
    return net.eval()


def test_the_file_is_read_once_and_every_consumer_still_runs_and_matches(monkeypatch):
    x = (np.random.default_rng(0).random((12, 3, 12)) < 0.4).astype(np.float64)
    graph = spikec.compile(_two_output_network(), x, targets="none").graph
    reads, imported = [], []
    real_read, real_import = hdf5.read, consumers._import

    def counting_read(path, *a, **k):
        reads.append(str(path))
        return real_read(path, *a, **k)

    def recording_import(consumer, source, dt):
        imported.append((consumer, source))
        return real_import(consumer, source, dt)

    monkeypatch.setattr(hdf5, "read", counting_read)
    monkeypatch.setattr(consumers, "_import", recording_import)
    report = nir_target(graph, x, run(graph, x), {}).report
    assert len(reads) == 1, reads
    ran = {k: v for k, v in report["consumers"].items() if v["ran"]}
    assert {"snntorch", "norse"} <= set(ran), report["consumers"]
    for name, verdict in ran.items():   # run one output at a time, and each matched the deployed graph
        assert verdict["spike_exact"] and "2 one-output graphs" in verdict["per_output"], (name, verdict)
        assert verdict["spikes_compared"] > 0
    sources = [s for _, s in imported]
    assert sorted(c for c, _ in imported) == sorted(ran), imported   # one run per consumer for both outputs
    assert len({id(s) for s in sources}) == len(sources)   # a copy each


VERDICT = ("ran", "spike_exact", "neurons_compared", "spikes_compared", "spike_mismatches", "spike_count",
           "output_max_rel_diff", "mismatches_at_exact_ties")


def test_one_run_for_all_outputs_gives_the_verdicts_of_each_output_run_alone(monkeypatch):
    """The outputs read off one run (a hook at the node each Output reads) are what each one-output graph run alone
    returns: the verdicts agree figure for figure, on a network where the membrane output has real values."""
    from spikec.targets import nir as nir_target_mod
    x = (np.random.default_rng(2).random((15, 4, 12)) < 0.5).astype(np.float64)
    graph = spikec.compile(_two_output_network(), x, targets="none").graph
    reference = run(graph, x)
    shared = nir_target(graph, x, reference, {}).report["consumers"]
    monkeypatch.setattr(nir_target_mod, "_one_run", lambda name, path, parts, *a: [None] * len(parts))
    alone = nir_target(graph, x, reference, {}).report["consumers"]
    assert {k for k, v in shared.items() if v["ran"]} >= {"snntorch", "norse"}
    for name in shared:
        assert {k: shared[name].get(k) for k in VERDICT} == {k: alone[name].get(k) for k in VERDICT}, name
        assert shared[name].get("spike_count", 1) > 0


def test_a_shared_run_that_differs_is_checked_by_running_the_part_alone(monkeypatch):
    """If the output read off the shared run differed (a hook at the wrong place), the verdict is not taken from it:
    that part is run alone, and the consumer's verdict is its own run's."""
    from spikec.targets import nir as nir_target_mod
    x = (np.random.default_rng(3).random((10, 2, 12)) < 0.5).astype(np.float64)
    graph = spikec.compile(_two_output_network(), x, targets="none").graph
    real = nir_target_mod._one_run

    def corrupted(*a):
        return [None if r is None else (r[0] + 1.0, r[1]) for r in real(*a)]

    monkeypatch.setattr(nir_target_mod, "_one_run", corrupted)
    report = nir_target(graph, x, run(graph, x), {}).report
    assert all(v["spike_exact"] for v in report["consumers"].values() if v["ran"]), report["consumers"]


def test_an_import_that_changes_its_graph_does_not_change_the_next_consumers(monkeypatch):
    """nirtorch replaces subgraphs in the graph it is given: a consumer that empties its graph leaves the others
    theirs (they still run and match)."""
    x = (np.random.default_rng(1).random((10, 2, 12)) < 0.4).astype(np.float64)
    graph = spikec.compile(_two_output_network(), x, targets="none").graph
    real_import = consumers._import
    seen = []

    def vandal_import(consumer, source, dt):
        seen.append(copy.deepcopy(sorted(source.nodes)))
        module = real_import(consumer, source, dt)
        source.nodes.clear()      # what a careless importer could do to the graph it was handed
        source.edges.clear()
        return module

    monkeypatch.setattr(consumers, "_import", vandal_import)
    report = nir_target(graph, x, run(graph, x), {}).report
    assert len(seen) >= 2 and all(s for s in seen), seen   # every consumer was given a full graph
    assert all(v["spike_exact"] for v in report["consumers"].values() if v["ran"]), report["consumers"]
