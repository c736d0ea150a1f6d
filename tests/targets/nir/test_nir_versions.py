"""NIR 1.0.7 and 1.0.8 files: ``golden/nir_1_0_7_lif.nir`` was written by nir 1.0.7's own ``nir.write`` (installed
apart, ``pip install --no-deps --target DIR nir==1.0.7``); spikec (nir 1.0.8) reads and compiles it, and
``nir-check`` names the version and, per installed consumer, what would change its spikes."""
from pathlib import Path

import numpy as np

from spikec.targets.nir import check, consumers

OLD = Path(__file__).parent / "golden" / "nir_1_0_7_lif.nir"


def test_nir_check_names_the_version_and_each_consumer():
    result = check.check_file(OLD)
    assert result["compiles"]
    version = [f for f in result["findings"] if f["kind"] == "nir_version"]
    assert len(version) == 1 and "written by nir 1.0.7" in version[0]["message"]
    for name in consumers.CONSUMERS:
        mine = [f for f in result["findings"] if f["kind"] == f"consumer_{name}"]
        assert mine or consumers.available(name) is not None, name
    assert any("no known limit" in f["message"] for f in result["findings"] if f["kind"] == "consumer_snntorch")
    assert any("MultiSpike" in f["message"] for f in result["findings"] if f["kind"] == "consumer_sinabs")


def test_a_file_of_this_nir_is_named_too(tmp_path):
    import nir
    path = tmp_path / "new.nir"
    nir.write(path, nir.read(OLD))
    assert check.file_version(path) == nir.version == "1.0.8"
    assert check.file_version(OLD) == "1.0.7"


def test_a_1_0_7_file_compiles_and_its_nir_runs_in_the_consumers(tmp_path):
    from spikec.app.driver import CompileOptions, compile_model
    x = tmp_path / "x.npz"
    np.savez(x, input=np.random.default_rng(0).random((30, 2, 3)))
    c = compile_model(CompileOptions(str(OLD), inputs=str(x), target="nir"))
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"]
    for name in ("snntorch", "norse"):
        v = t["consumers"][name]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 0, (name, v)


def test_rockpool_limits_are_what_its_from_nir_does(tmp_path):
    """Rockpool 3.1.0's from_nir (nir-check names it): a NIR LIF raises (it reads tau_mem), a CubaLIF builds its
    LIFTorch -- pinned, so that a fixed Rockpool shows up."""
    import nir
    import pytest
    if consumers.available("rockpool") is not None:
        pytest.skip(consumers.available("rockpool"))
    from rockpool.nn.modules.torch.nir import from_nir
    g = nir.read(OLD)
    assert any("tau_mem" in w for w in consumers.limits(g, 1e-4)["rockpool"])
    with consumers._quiet(), pytest.raises(AttributeError, match="tau_mem"):
        from_nir(g)
    found = check.check_file(OLD)["findings"]
    assert any(f["kind"] == "consumer_rockpool" and "tau_mem" in f["message"] for f in found)
    cuba = nir.CubaLIF(tau_syn=np.full(3, 1e-3), tau_mem=np.full(3, 1e-4), r=np.ones(3), v_leak=np.zeros(3),
                       v_threshold=np.ones(3), v_reset=np.zeros(3), w_in=np.full(3, 10.0))
    g2 = nir.NIRGraph(nodes={"input": nir.Input(np.array([3])), "fc": nir.Affine(weight=np.eye(3), bias=np.zeros(3)),
                             "lif": cuba, "output": nir.Output(np.array([3]))},
                      edges=[("input", "fc"), ("fc", "lif"), ("lif", "output")])
    assert any("LIFTorch" in w and "dt = min" in w for w in consumers.limits(g2, 1e-4)["rockpool"])
    with consumers._quiet():
        built = from_nir(g2)
    assert "LIFTorch" in [type(m).__name__ for m in built.children()]


def test_the_target_writes_either_version_as_that_nir_writes_it(tmp_path):
    """The target option ``nir_version``: a 1.0.7 file is laid out as nir 1.0.7's own write lays out the golden file
    (uncompressed arrays, the version an object string), a 1.0.8 one as nir 1.0.8's; both read back exact."""
    import h5py
    import pytest
    from spikec.compiler.errors import BadInput
    from spikec.compiler.interpreter import run
    from spikec.targets.nir.frontend import load_nir
    from spikec.targets.nir import hdf5, nir_target
    graph = load_nir(OLD, input_kind="real")
    x = np.random.default_rng(0).random((30, 2, 3))
    ref = run(graph, x)

    def layout(path):
        with h5py.File(path, "r") as f:
            seen = []
            f.visititems(lambda n, o: seen.append(o.compression) if isinstance(o, h5py.Dataset) and o.dtype.kind in "fiu" and o.ndim else None)
            return set(seen), f["version"].dtype, f["version"][()]
    golden = layout(OLD)
    for version in hdf5.WRITE_VERSIONS:
        result = nir_target(graph, x, ref, {"nir_version": version})
        assert result.ok and result.report["exact"], result.report
        path = tmp_path / f"{version}.nir"
        result.files["model.nir"](path)
        assert check.file_version(path) == version
        compression, dtype, _ = layout(path)
        assert compression == ({None} if version == "1.0.7" else {"gzip"})
        if version == "1.0.7":
            assert (compression, dtype) == golden[:2]
        found = [f for f in check.check_file(path)["findings"] if f["kind"] == "nir_version"]
        assert f"written by nir {version}" in found[0]["message"]
    with pytest.raises(BadInput, match="cannot be written"):
        nir_target(graph, x, ref, {"nir_version": "1.0.6"})
