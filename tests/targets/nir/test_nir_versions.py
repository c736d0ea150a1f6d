"""NIR 1.0.7 and 1.0.8 files: ``golden/nir_1_0_7_lif.nir`` was written by nir 1.0.7's own ``nir.write`` (installed
apart, ``pip install --no-deps --target DIR nir==1.0.7``); spikec (nir 1.0.8) reads and compiles it; the real nir 1.0.7
(installed so under the temporary directory, run in a subprocess) reads both layouts spikec writes and writes a file
spikec reads; and ``nir-check`` names the version and, per installed consumer, what would change its spikes."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

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
    (uncompressed arrays), a 1.0.8 one as nir 1.0.8's (gzip); both read back exact."""
    import h5py
    import pytest
    from spikec.ir.errors import BadInput
    from spikec.core.interpreter import run
    from spikec.frontend.nir_file import load_nir
    from spikec.formats.nir import hdf5
    from spikec.targets.nir import nir_target
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


# -- the real nir 1.0.7, installed apart (never into the venv), run in a subprocess with it first on sys.path -----------
_DUMP = r'''
import json, sys
import numpy as np
import nir
def plain(v):
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return np.asarray(v).tolist() if not isinstance(v, (str, bytes)) else str(v)
def dump(g):
    return {"nodes": {k: [type(v).__name__, {p: plain(x) for p, x in vars(v).items() if p != "metadata"}]
                      for k, v in g.nodes.items()}, "edges": sorted(map(list, g.edges))}
g = nir.read(sys.argv[1])
if len(sys.argv) > 2:
    nir.write(sys.argv[2], g)
print(json.dumps({"version": nir.version, "file": nir.__file__, "graph": dump(g)}))
'''


@pytest.fixture(scope="module")
def nir_1_0_7():
    """``pip install --no-deps --target <tmp>/spikec-nir-1.0.7 nir==1.0.7`` from the configured registries, once per
    machine (cached in the temporary directory; a worker installing at the same time loses the rename and uses the
    winner's copy)."""
    root = Path(tempfile.gettempdir()) / "spikec-nir-1.0.7"
    if not (root / "nir" / "__init__.py").is_file():
        part = root.with_name(f"{root.name}.{os.getpid()}")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(part),
                            "nir==1.0.7"], capture_output=True, text=True, timeout=600)
        if r.returncode:
            pytest.skip(f"nir 1.0.7 is not installable from the configured registries: {r.stderr[-400:]}")
        try:
            os.replace(part, root)
        except OSError:
            shutil.rmtree(part, ignore_errors=True)
    return root


def with_nir_1_0_7(root, *args) -> dict:
    """Run ``_DUMP`` (read ``args[0]``, and write it to ``args[1]`` when given) under nir 1.0.7: what it reads."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, "-c", _DUMP, *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["version"] == "1.0.7" and Path(out["file"]).is_relative_to(root), out["file"]
    return out


def _dump_here(path) -> dict:
    """What this process's nir (1.0.8) reads, in the subprocess's form."""
    import nir
    plain = lambda v: {k: plain(x) for k, x in v.items()} if isinstance(v, dict) else (
        str(v) if isinstance(v, (str, bytes)) else np.asarray(v).tolist())
    g = nir.read(path)
    return {"nodes": {k: [type(v).__name__, {p: plain(x) for p, x in vars(v).items() if p != "metadata"}]
                      for k, v in g.nodes.items()}, "edges": sorted(map(list, g.edges))}


def _graph(conv: bool = False):
    """input (6,) -> linear -> a subtract-reset lif (written as the CubaLIF reset cycle) -> linear -> a zero-reset
    lif; ``conv``: input (2, 4, 4) -> conv2d -> the subtract-reset lif (a Conv2d cycle) -> flatten -> linear -> lif."""
    from spikec.ir.graph import Graph, Node, TensorType
    from spikec.core.verify import verify
    from spikec.frontend import ConvertContext
    rng = np.random.default_rng(7)
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType((2, 4, 4) if conv else (6,), "real"))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    lif = lambda name, x, reset: ctx.emit(name, "lif", [x], {"reset": reset}, {
        "beta": 0.875, "alpha": 1.0, "bias": 0.0, "threshold": 0.5, "v_reset": 0.0})
    if conv:
        x = ctx.emit("conv", "conv2d", ["input"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1),
                                                   "groups": 1}, {"weight": rng.normal(0.2, 0.4, (3, 2, 3, 3))})
        x = ctx.emit("flat", "flatten", [lif("lif1", x, "subtract")], {"start": 0, "end": 2})
        x = ctx.emit("fc1", "linear", [x], {}, {"weight": rng.normal(0.1, 0.2, (5, 48)), "bias": np.zeros(5)})
    else:
        x = ctx.emit("fc1", "linear", ["input"], {}, {"weight": rng.normal(0.2, 0.5, (5, 6)), "bias": np.zeros(5)})
    x = lif("lif1" if not conv else "lif1b", x, "subtract")
    x = ctx.emit("fc2", "linear", [x], {}, {"weight": rng.normal(0.3, 0.6, (4, 5)), "bias": np.zeros(4)})
    out = lif("lif2", x, "zero")
    return verify(Graph(tuple(ctx.nodes), (out,)))


def test_nir_1_0_7_itself_reads_what_spikec_writes_in_either_version(nir_1_0_7, tmp_path):
    """The real nir 1.0.7 reads both layouts spikec writes (a CubaLIF reset cycle, a LIF) to the same nodes, parameters,
    types and edges as nir 1.0.8 reads them."""
    from spikec.core.interpreter import run
    from spikec.formats.nir import hdf5
    from spikec.targets.nir import nir_target
    for conv in (False, True):
        graph = _graph(conv)
        x = np.random.default_rng(0).random((20, 2, *graph.inputs[0].type.shape)) * 2
        ref = run(graph, x)
        for version in hdf5.WRITE_VERSIONS:
            result = nir_target(graph, x, ref, {"nir_version": version})
            assert result.ok and result.report["exact"], result.report
            path = tmp_path / f"spikec_{version}_{conv}.nir"
            result.files["model.nir"](path)
            theirs = with_nir_1_0_7(nir_1_0_7, path)["graph"]
            assert {"CubaLIF", "Conv2d" if conv else "Affine"} <= {t for t, _ in theirs["nodes"].values()}
            assert theirs == _dump_here(path), (version, conv)


def test_spikec_reads_and_compiles_a_file_nir_1_0_7_writes(nir_1_0_7, tmp_path):
    """nir 1.0.7's own nir.write of spikec's file: spikec names its version, reads it (the CubaLIF cycle back as the
    subtract-reset lif) to the same spikes, and the 1.0.7 layout spikec writes is the one nir 1.0.7 writes."""
    import h5py
    from spikec.core.checker import compare_graphs
    from spikec.core.interpreter import run
    from spikec.targets.nir import nir_target
    from spikec.frontend.nir_file import load_nir
    graph = _graph()
    x = np.random.default_rng(1).random((20, 2, 6)) * 2
    ref = run(graph, x)
    ours = tmp_path / "spikec_1.0.7.nir"
    nir_target(graph, x, ref, {"nir_version": "1.0.7"}).files["model.nir"](ours)
    theirs = tmp_path / "by_nir_1.0.7.nir"
    with_nir_1_0_7(nir_1_0_7, tmp_path / "spikec_1.0.7.nir", theirs)
    assert check.file_version(theirs) == "1.0.7"

    def layout(path):
        with h5py.File(path, "r") as f:
            seen = []
            f.visititems(lambda n, o: seen.append((n, o.compression, o.dtype.str)) if isinstance(o, h5py.Dataset)
                         else None)
            return sorted(seen), f["version"].dtype
    assert layout(ours) == layout(theirs)
    found = check.check_file(theirs)
    assert found["compiles"], found["findings"]
    assert any("written by nir 1.0.7" in f["message"] for f in found["findings"] if f["kind"] == "nir_version")
    for scheme in ("snntorch", "norse"):
        back = load_nir(theirs, scheme=scheme, input_kind="real")
        assert [n.attrs["reset"] for n in back.nodes if n.op == "lif"] == ["subtract", "zero"]
        result = compare_graphs(graph, back, x)
        assert result.equivalent and result.spikes_compared > 0, result.describe()
