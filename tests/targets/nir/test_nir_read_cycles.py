"""spikec reads back the CubaLIF reset cycles its NIR target writes (``spikec.frontend.nir_cycles``): snnTorch's default Leaky
and RLeaky compile -> model.nir -> spikec reads the op they came from, with its parameters -> the same spikes as the
compiled graph; ``nir-check`` says spikec reads the file. A cycle spikec did not write is refused naming the node."""
import nir
import numpy as np
import pytest

from spikec.core.checker import compare_graphs
from spikec.ir.errors import UnsupportedOp
from spikec.targets.nir import check
from spikec.frontend.nir_file import load_nir

pytest.importorskip("snntorch")

MODELS = '''
import snntorch as snn
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, conv=False, rleaky=False, **kw):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Conv2d(2, 4, 3, padding=1) if conv else nn.Linear(10, 6)
        self.lif = (snn.RLeaky if rleaky else snn.Leaky)(init_hidden=True, **kw)

    def forward(self, x):
        return self.lif(self.fc(x))


def dense(): return Net(beta=0.9, threshold=1.0)
def dense_per_channel(): return Net(beta=torch.linspace(0.5, 0.95, 6), threshold=torch.linspace(0.4, 1.0, 6))
def dense_if(): return Net(beta=1.0, threshold=0.7)
def conv(): return Net(conv=True, beta=0.8, threshold=0.6)
def rleaky_dense(): return Net(rleaky=True, beta=0.9, threshold=0.5, linear_features=6)
def rleaky_one_to_one(): return Net(rleaky=True, beta=0.8, threshold=0.5, all_to_all=False, V=0.3)
def rleaky_conv(): return Net(conv=True, rleaky=True, beta=0.7, threshold=0.5, all_to_all=False, V=0.25)
'''
# factory -> (the op spikec reads back, its recurrence)
OPS = {"dense": ("lif_snntorch", None), "dense_per_channel": ("lif_snntorch", None), "dense_if": ("lif_snntorch", None),
       "conv": ("lif_snntorch", None), "rleaky_dense": ("rleaky_snntorch", "linear"),
       "rleaky_one_to_one": ("rleaky_snntorch", "one_to_one"), "rleaky_conv": ("rleaky_snntorch", "one_to_one")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("read_cycles")
    (d / "models.py").write_text(MODELS)
    rng = np.random.default_rng(5)
    np.savez(d / "dense.npz", input=rng.random((30, 3, 10)) * 4 - 1)
    np.savez(d / "conv.npz", input=rng.random((30, 2, 2, 5, 5)) * 3 - 1)
    return d


def _inputs(models, factory):
    return models / ("conv.npz" if "conv" in factory else "dense.npz")


def written(models, factory, tmp_path):
    """(compiled graph, model.nir spikec wrote, inputs)."""
    from spikec.app.driver import CompileOptions, compile_model
    c = compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(_inputs(models, factory)),
                                     stepping="step", target="nir"))
    assert c.report["equivalent"] and c.report["target"]["exact"], c.report["target"]
    path = tmp_path / "model.nir"
    c.files["model.nir"](path)
    return c.graph, path, np.load(_inputs(models, factory))["input"]


@pytest.mark.parametrize("factory", sorted(OPS))
def test_the_written_cycle_reads_back_as_its_op_with_the_same_spikes(models, factory, tmp_path):
    graph, path, x = written(models, factory, tmp_path)
    assert "CubaLIF" in {type(v).__name__ for v in nir.read(path).nodes.values()}
    found = check.check_file(path)
    assert found["compiles"] and not [f for f in found["findings"] if f["kind"] == "spikec_refuses"], found
    (source,) = [n for n in graph.nodes if n.op == OPS[factory][0]]
    for scheme in ("snntorch", "norse"):
        back = load_nir(path, scheme=scheme, input_kind="real")
        (read,) = [n for n in back.nodes if n.op == source.op]
        assert read.name == source.name
        assert (read.attrs["reset"], read.attrs["reset_delay"], read.attrs.get("recurrent")) == \
            ("subtract", True, OPS[factory][1])
        assert set(read.params) == set(source.params)   # an RLeaky's bias too (on the file's input path)
        if scheme == "snntorch":   # the parameters themselves, 0-dim-ness included (snnTorch's float32 products)
            for k in source.params:
                np.testing.assert_array_equal(np.asarray(read.params[k]), np.asarray(source.params[k]), k)
                assert np.ndim(read.params[k]) == np.ndim(source.params[k]), k
        result = compare_graphs(graph, back, x)
        assert result.equivalent and result.spikes_compared > 0, result.describe()


@pytest.mark.parametrize("factory", ["dense", "rleaky_conv", "rleaky_dense"])
def test_compiling_the_written_file_round_trips(models, factory, tmp_path):
    """compile -> model.nir -> spikec compiles that file (checked against its NIR interpreter) -> the NIR target writes
    the same cycle again, exact."""
    from spikec.app.driver import CompileOptions, compile_model
    graph, path, x = written(models, factory, tmp_path)
    c = compile_model(CompileOptions(str(path), inputs=str(_inputs(models, factory)), target="nir"))
    assert c.report["frontend"]["equivalent"] and c.report["frontend"]["spikes_compared"] > 0
    assert c.report["equivalent"] and c.report["target"]["exact"], c.report["target"]
    assert OPS[factory][0] in [n.op for n in c.graph.nodes]
    again = tmp_path / "again.nir"
    c.files["model.nir"](again)
    first, second = nir.read(path), nir.read(again)
    assert sorted(first.edges) == sorted(second.edges)
    assert {k: type(v).__name__ for k, v in first.nodes.items()} == {k: type(v).__name__ for k, v in second.nodes.items()}
    result = compare_graphs(graph, c.graph, x)
    assert result.equivalent, result.describe()


def _mutated(path, tmp_path, changes: dict):
    """``path`` with ``{node: {parameter: value}}`` changed."""
    g = nir.read(path)
    for node, params in changes.items():
        for k, v in params.items():
            setattr(g.nodes[node], k, v)
    out = tmp_path / f"mutated_{'_'.join(changes)}.nir"
    nir.write(out, nir.NIRGraph(nodes=g.nodes, edges=g.edges, metadata=g.metadata, type_check=False))
    return out


def test_a_cycle_spikec_did_not_write_is_refused_by_name(models, tmp_path):
    _, path, _ = written(models, "dense", tmp_path)
    cuba = nir.read(path).nodes["lif"]
    cases = [  # (changes, what the refusal names)
        ({"lif_reset": {"weight": np.diag(np.full(6, -0.7))}}, "NIR node 'lif_reset'.*neither the threshold"),
        ({"lif": {"tau_mem": cuba.tau_mem * 2}}, "NIR node 'lif'.*membrane decay"),
        ({"lif": {"v_leak": np.full(6, 0.1)}}, "NIR node 'lif'.*v_leak != 0"),
        ({"lif_reset": {"bias": np.full(6, 0.1)}}, "NIR node 'lif_reset'.*not a per-neuron weight"),
        ({"lif_reset_pass": {"weight": np.eye(6) * 2}}, "NIR node 'lif'.*'lif_reset_pass' .Affine. is not an identity"),
        # -T removed per spike with T < 0: snnTorch's Leaky would reset at the first step, the cycle does not
        ({"lif": {"v_threshold": -cuba.v_threshold}, "lif_reset": {"weight": np.eye(6)}},
         "NIR node 'lif'.*negative threshold .-1.*first step"),
    ]
    for changes, match in cases:
        bad = _mutated(path, tmp_path, changes)
        with pytest.raises(UnsupportedOp, match=match):
            load_nir(bad)
        found = check.check_file(bad)
        assert not found["compiles"] and [f for f in found["findings"] if f["kind"] == "spikec_refuses"], changes


@pytest.mark.parametrize("beta, alpha, theta", [(1.0, 1.0, 0.5), (0.9, 1.0, 0.7), (0.75, 0.5, 0.3), (1.0, 2.0, 0.6)])
def test_spikecs_own_subtract_reset_lif_reads_back_as_itself(beta, alpha, theta, tmp_path):
    """``composed.lif_subtract``'s cycle (feedback ``-beta theta / alpha`` in the current's units) reads back as a
    subtract-reset lif -- also at beta = 1, where theta/alpha is 1 ulp above the file's threshold and float32 of
    that threshold is theta/alpha again: the lif's own match is tried first, not the Leaky's."""
    from spikec.core.interpreter import run
    from spikec.ir.graph import Graph, Node, TensorType
    from spikec.core.verify import verify
    from spikec.frontend import ConvertContext
    from spikec.targets.nir.export import export_graph
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType((5,), "real"))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    fc = ctx.emit("fc", "linear", ["input"], {}, {"weight": np.random.default_rng(2).normal(0.3, 0.5, (4, 5)),
                                                 "bias": np.zeros(4)})
    out = ctx.emit("neuron", "lif", [fc], {"reset": "subtract"}, {"beta": beta, "alpha": alpha, "bias": 0.0,
                                                                  "threshold": theta, "v_reset": 0.0})
    graph = verify(Graph(tuple(ctx.nodes), (out,)))
    path = tmp_path / "lif.nir"
    nir.write(path, export_graph(graph).graph)
    assert "CubaLIF" in {type(v).__name__ for v in nir.read(path).nodes.values()}
    x = np.random.default_rng(3).random((40, 2, 5)) * 2
    assert run(graph, x).values["neuron"].sum() > 10
    for scheme in ("snntorch", "norse"):
        back = load_nir(path, scheme=scheme, input_kind="real")
        (read,) = [n for n in back.nodes if n.name == "neuron"]
        assert (read.op, read.attrs["reset"]) == ("lif", "subtract")
        result = compare_graphs(graph, back, x)
        assert result.equivalent, result.describe()


def test_a_conv1d_reset_cycle_is_refused_naming_the_ir_gap(tmp_path):
    """The Leaky of a (C, L) step is written with a kernel-1 Conv1d identity (SpikingJelly runs it); the IR has no
    1-D convolution, so spikec's reader names that instead of reading it."""
    n = 3
    nodes = {"input": nir.Input(np.array([n])),
             "lif": nir.CubaLIF(tau_syn=np.full(n, 1e-3), tau_mem=np.full(n, 1e-4), r=np.ones(n), v_leak=np.zeros(n),
                                v_threshold=np.ones(n), v_reset=np.zeros(n), w_in=np.full(n, 10.0)),
             "fb": nir.Affine(weight=-np.eye(n), bias=np.zeros(n)),
             "pass": nir.Conv1d(input_shape=n, weight=np.eye(n).reshape(n, n, 1), stride=1, padding=0, dilation=1,
                                groups=1, bias=np.zeros(n)),
             "output": nir.Output(np.array([n]))}
    edges = [("input", "lif"), ("lif", "fb"), ("fb", "pass"), ("pass", "lif"), ("lif", "output")]
    path = tmp_path / "c1.nir"
    nir.write(path, nir.NIRGraph(nodes=nodes, edges=edges, metadata={}, type_check=False))
    with pytest.raises(UnsupportedOp, match="NIR node 'lif'.*Conv1d in it .the IR has no 1-D convolution"):
        load_nir(path)


SJ_MODELS = '''
import torch
from spikingjelly.activation_based import layer, neuron
from torch import nn


def soft():
    torch.manual_seed(0)
    return nn.Sequential(layer.Linear(10, 6, step_mode="m"), neuron.LIFNode(tau=3.0, v_threshold=0.5, v_reset=None,
                                                                             step_mode="m"))
'''


def test_spikingjellys_soft_reset_reads_back_as_a_subtract_reset_lif(models, tmp_path):
    """``composed.sj_soft`` (k x into the CubaLIF cycle, feedback -(1 - k) theta) is, in exact arithmetic, a
    subtract-reset lif of beta 1 - k after the k x Affine: read so, with the compiled graph's spikes."""
    pytest.importorskip("spikingjelly.activation_based")
    from spikec.app.driver import CompileOptions, compile_model
    (tmp_path / "sj.py").write_text(SJ_MODELS)
    c = compile_model(CompileOptions(f"{tmp_path / 'sj.py'}:soft", inputs=str(_inputs(models, "dense")),
                                     stepping="multistep", target="nir"))
    assert c.report["equivalent"] and c.report["target"]["exact"], c.report["target"]
    path = tmp_path / "model.nir"
    c.files["model.nir"](path)
    back = load_nir(path, dt=1.0, scheme="norse", input_kind="real")   # the form SpikingJelly's neurons are written in
    (read,) = [n for n in back.nodes if n.op == "lif"]
    assert read.attrs["reset"] == "subtract" and np.isclose(float(read.params["beta"]), 1 - 1 / 3, rtol=1e-12)
    x = np.load(_inputs(models, "dense"))["input"]
    result = compare_graphs(c.graph, back, x)
    assert result.equivalent and result.spikes_compared > 0, result.describe()
