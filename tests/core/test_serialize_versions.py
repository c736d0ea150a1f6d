"""graph.json versions: version 2 names every firing threshold ``threshold``; a version-1 document (``v_th`` in
silif/csilif, ``theta`` in ttfs_fire) still loads, upgraded, and computes what it computed."""
import json

import numpy as np
import pytest

from spikec.ir.errors import IRError
from spikec.core.interpreter import run
from spikec.core.serialize import VERSION, graph_to_json, load_graph, save_graph, upgrade

# a version-1 document written out by hand, as spikec wrote it before the rename: linear -> silif
V1_GRAPH = {
    "format": "spikec-ir", "version": 1, "outputs": ["s"], "meta": {},
    "nodes": [
        {"name": "x", "op": "input", "inputs": [], "type": {"shape": [3], "kind": "binary", "ceiling": None,
                                                           "substeps": 1}, "attrs": {}, "params": [], "scope": ""},
        {"name": "fc", "op": "linear", "inputs": ["x"], "type": {"shape": [2], "kind": "real", "ceiling": None,
                                                                "substeps": 1}, "attrs": {}, "params": ["weight"],
         "scope": "fc"},
        {"name": "s", "op": "silif", "inputs": ["fc"], "type": {"shape": [2], "kind": "binary", "ceiling": None,
                                                               "substeps": 1}, "attrs": {"kappa": 0.5},
         "params": ["b", "decay", "v_th"], "scope": "s"},
    ]}
V1_WEIGHTS = {"fc/weight": np.array([[0.5, 0.25, -0.5], [0.75, 0.5, 0.25]]), "s/b": np.array([1.0, 1.0]),
              "s/decay": np.array([0.75, 0.5]), "s/v_th": np.array([0.375, 0.5])}


def _write(directory, doc, weights):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "graph.json").write_text(json.dumps(doc))
    with open(directory / "weights.npz", "wb") as f:
        np.savez(f, **weights)


def test_the_writer_writes_version_2(tmp_path):
    _write(tmp_path / "v1", V1_GRAPH, V1_WEIGHTS)
    assert VERSION == 2 and graph_to_json(load_graph(tmp_path / "v1"))["version"] == 2


def test_a_version_1_document_loads_with_the_threshold_renamed(tmp_path):
    _write(tmp_path, V1_GRAPH, V1_WEIGHTS)
    g = load_graph(tmp_path)
    s = g.node("s")
    assert sorted(s.params) == ["b", "decay", "threshold"]
    assert np.array_equal(s.params["threshold"], V1_WEIGHTS["s/v_th"])
    assert graph_to_json(g)["version"] == 2
    x = (np.random.default_rng(0).random((6, 2, 3)) < 0.5).astype(np.float64)
    spikes = run(g, x).values["s"]
    assert spikes.any() and not spikes.all()      # the threshold is read: the neuron fires, but not always


def test_a_version_1_document_saves_back_as_version_2(tmp_path):
    _write(tmp_path / "v1", V1_GRAPH, V1_WEIGHTS)
    (tmp_path / "v2").mkdir()
    save_graph(load_graph(tmp_path / "v1"), tmp_path / "v2")
    doc = json.loads((tmp_path / "v2" / "graph.json").read_text())
    assert doc["version"] == 2 and doc["nodes"][2]["params"] == ["b", "decay", "threshold"]
    with np.load(tmp_path / "v2" / "weights.npz") as z:
        assert "s/threshold" in z.files and "s/v_th" not in z.files


def test_upgrade_renames_each_op_and_leaves_its_arguments_alone():
    doc = {"format": "spikec-ir", "version": 1, "outputs": [], "nodes": [
        {"name": "a", "op": "silif", "params": ["b", "decay", "v_th"]},
        {"name": "c", "op": "csilif", "params": ["a_im", "a_re", "b", "v_th"]},
        {"name": "t", "op": "ttfs_fire", "params": ["theta"]},
        {"name": "l", "op": "lif", "params": ["alpha", "beta", "bias", "threshold", "v_reset"]},
        {"name": "o", "op": "other", "params": ["v_th", "theta"]}]}
    weights = {"a/v_th": 1, "c/v_th": 2, "t/theta": 3, "l/threshold": 4, "o/v_th": 5, "o/theta": 6}
    before = json.dumps(doc), dict(weights)
    new, w = upgrade(doc, weights)
    assert (json.dumps(doc), weights) == before
    assert new["version"] == 2
    assert [d["params"] for d in new["nodes"]] == [["b", "decay", "threshold"], ["a_im", "a_re", "b", "threshold"],
                                                   ["threshold"], ["alpha", "beta", "bias", "threshold", "v_reset"],
                                                   ["v_th", "theta"]]
    assert w == {"a/threshold": 1, "c/threshold": 2, "t/threshold": 3, "l/threshold": 4, "o/v_th": 5, "o/theta": 6}


def test_a_current_document_is_not_changed_by_upgrade():
    doc = dict(V1_GRAPH, version=2)
    assert upgrade(doc, V1_WEIGHTS) == (doc, V1_WEIGHTS)


@pytest.mark.parametrize("version", [0, 3, "1", 1.0, True, None])
def test_other_versions_are_refused_naming_the_version(tmp_path, version):
    _write(tmp_path, dict(V1_GRAPH, version=version), V1_WEIGHTS)
    with pytest.raises(IRError, match=f"version={version!r}"):
        load_graph(tmp_path)


def test_a_version_2_document_with_the_old_name_is_refused(tmp_path):
    _write(tmp_path, dict(V1_GRAPH, version=2), V1_WEIGHTS)
    with pytest.raises(IRError, match="unexpected parameter 'v_th'"):
        load_graph(tmp_path)
