"""Sinabs's IAF / LIF / ExpLeak (and their Squeeze forms) against the Sinabs layers themselves: a float64 run of the
layer in its own layout and the IR of ``SinabsNet(layer)`` agree bit for bit (spikes, counts and membranes), in the
reference interpreter and in onnxruntime; a Sinabs CNN as its users write it compiles equivalent on ONNX; Lava and
NIR refuse the op by name; checkpoints saved after a forward (batch-shaped state buffers) load."""
import numpy as np
import pytest
import torch
from torch import nn

from spikec.frontend import sinabs as frontend  # noqa: E402  (first: it lets Sinabs import without matplotlib)

sinabs = pytest.importorskip("sinabs")
import sinabs.layers as sl  # noqa: E402
from sinabs.activation import MaxSpike, MembraneReset, MembraneSubtract, SingleSpike  # noqa: E402

import spikec  # noqa: E402
import spikec.targets.onnx.sinabs_sj_emitters  # noqa: E402,F401  (until spikec.targets.onnx imports it)
from spikec.app import loader  # noqa: E402
from spikec.ir.errors import BadInput, SpikecError, UnsupportedOp  # noqa: E402
from spikec.core.interpreter import run  # noqa: E402
from spikec.frontend import trace  # noqa: E402
from spikec.targets import get_target  # noqa: E402
from spikec.targets.onnx import export, run_model  # noqa: E402

T, B, SHAPE = 7, 3, (4, 5)
th = torch.tensor

LAYERS = {  # name: (factory, its lif_sinabs spike attr, or "lif" where it is the built-in lif)
    "IAF multi": (lambda: sl.IAF(), "multi"),
    "IAF single": (lambda: sl.IAF(spike_fn=SingleSpike, spike_threshold=th(0.75)), "lif"),
    "IAF single float64 threshold": (lambda: sl.IAF(spike_fn=SingleSpike, spike_threshold=th(0.3, dtype=torch.float64)),
                                     "single"),
    "IAF reset": (lambda: sl.IAF(spike_fn=SingleSpike, reset_fn=MembraneReset()), "lif"),
    "LIF single": (lambda: sl.LIF(tau_mem=3.0, spike_fn=SingleSpike, spike_threshold=th(0.3)), "lif"),
    "LIF single min_v_mem": (lambda: sl.LIF(tau_mem=3.0, spike_fn=SingleSpike, min_v_mem=-0.25), "single"),
    "IAF min_v_mem": (lambda: sl.IAF(min_v_mem=-0.5, spike_threshold=th(0.3)), "multi"),
    "IAF tau_syn": (lambda: sl.IAF(tau_syn=3.0), "multi"),
    "LIF": (lambda: sl.LIF(tau_mem=5.0, spike_threshold=th(0.3)), "multi"),
    "LIF reset_value": (lambda: sl.LIF(tau_mem=3.0, norm_input=False, spike_fn=SingleSpike,
                                       reset_fn=MembraneReset(reset_value=0.25)), "single"),
    "LIF max subtract_value": (lambda: sl.LIF(tau_mem=4.0, norm_input=False, spike_fn=MaxSpike(2),
                                              reset_fn=MembraneSubtract(subtract_value=0.7)), "max"),
    "LIF train_alphas": (lambda: sl.LIF(tau_mem=4.0, tau_syn=2.0, train_alphas=True, norm_input=False,
                                        spike_threshold=th(0.3)), "multi"),
    "ExpLeak": (lambda: sl.ExpLeak(tau_mem=3.0), "none"),
    "ExpLeak norm min": (lambda: sl.ExpLeak(tau_mem=3.0, norm_input=True, min_v_mem=-0.2), "none"),
    "IAFSqueeze": (lambda: sl.IAFSqueeze(num_timesteps=T, spike_threshold=th(0.5)), "multi"),
    "LIFSqueeze": (lambda: sl.LIFSqueeze(batch_size=B, tau_mem=2.5, norm_input=False, spike_fn=SingleSpike),
                   "lif"),
    "ExpLeakSqueeze": (lambda: sl.ExpLeakSqueeze(num_timesteps=T, tau_mem=2.0), "none"),
}


def own_run(layer, x: torch.Tensor) -> np.ndarray:
    """The Sinabs layer on its own layout ([B, T, ...] or [B*T, ...] batch-major), float64, from rest."""
    layer = layer.double()
    with torch.no_grad():
        if isinstance(layer, sl.SqueezeMixin):
            y = layer(x.transpose(0, 1).flatten(0, 1)).unflatten(0, (x.shape[1], x.shape[0]))
        else:
            y = layer(x.transpose(0, 1))
    return y.transpose(0, 1).double().numpy()


def inputs(seed, scale=1.5) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, B, *SHAPE, generator=g, dtype=torch.float64) * scale


@pytest.mark.parametrize("name", list(LAYERS))
def test_each_layer_is_its_sinabs_layer_bit_for_bit(name):
    make, kind = LAYERS[name]
    for seed in range(3):
        torch.manual_seed(seed)
        x = inputs(seed)
        graph = trace(frontend.SinabsNet(make()), SHAPE, input_kind="real")
        (node,) = [n for n in graph.nodes if n.op in ("lif_sinabs", "lif")]
        assert (node.op if node.op == "lif" else node.attrs["spike"]) == kind
        got = run(graph, x.numpy()).values[graph.outputs[0]]
        want = own_run(make(), x)
        assert np.array_equal(got, want), name
        assert np.array_equal(run_model(export(graph, T), {"input": x.numpy()})[graph.outputs[0]], want), name
    if kind != "none":  # the inputs fire, and counts reach past one spike where counts exist
        assert want.any() and not want.all()
    if kind in ("multi", "max"):
        assert want.max() == (2 if kind == "max" else want.max()) and want.max() >= 2


def test_the_layer_keeps_state_between_calls_and_sinabsnet_starts_each_run_from_rest():
    x = inputs(5)
    layer = sl.IAF(spike_threshold=th(0.5)).double()
    first = own_run(layer, x)
    assert not np.array_equal(own_run(layer, x), first)  # Sinabs carries v_mem into the next call
    net = frontend.SinabsNet(layer)
    with torch.no_grad():
        assert np.array_equal(net(x).numpy(), first) and np.array_equal(net(x).numpy(), first)
    assert layer.v_mem.shape == (0,)


def cnn():
    """A Sinabs CNN as Sinabs users write it: [B*T, C, H, W] through Squeeze layers."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), sl.IAFSqueeze(num_timesteps=T, spike_threshold=th(0.5)),
                         nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5),
                         sl.IAFSqueeze(num_timesteps=T, spike_threshold=th(0.25)))


def cnn_inputs():
    return (torch.rand(T, B, 2, 8, 8, generator=torch.Generator().manual_seed(1)) < 0.5).float().numpy()


def test_a_sinabs_cnn_compiles_equivalent_on_onnx():
    c = spikec.compile(frontend.SinabsNet(cnn()), cnn_inputs(), targets=("onnx",))
    assert c.equivalent and c.targets["onnx"]["spike_exact"]
    assert [n.op for n in c.graph.nodes].count("lif_sinabs") == 2
    out = c.run(cnn_inputs())
    assert out.any() and not out.all()


def test_lava_refuses_the_op_by_name_and_nir_writes_it_for_sinabs():
    """Lava has no bound on MultiSpike's count; NIR writes it in the scheme only sinabs.from_nir reads (its
    MultiSpike subtract-reset IAF), proved in spikec's interpreter (targets/nir tests run Sinabs itself)."""
    graph = trace(frontend.SinabsNet(sl.IAF()), SHAPE, input_kind="real")
    assert [n.op for n in graph.nodes if n.op != "input"] == ["lif_sinabs"]
    x = inputs(0).numpy()
    with pytest.raises(SpikecError) as e:
        get_target("lava")(graph, x, run(graph, x), {"seed": 0})
    assert "lif_sinabs" in str(e.value)
    result = get_target("nir")(graph, x, run(graph, x), {"seed": 0})
    assert result.ok and result.report["scheme"] == "sinabs"


def test_a_sinabs_layer_outside_sinabsnet_is_refused_by_name():
    with pytest.raises(UnsupportedOp) as e:
        trace(nn.Sequential(nn.Linear(5, 5), sl.IAF()), (5,))
    assert "'1'" in e.value.where and "IAF" in e.value.where and "SinabsNet" in e.value.remedy


def test_subclasses_and_custom_spike_functions_are_refused():
    with pytest.raises(UnsupportedOp, match="IAFRecurrent"):
        trace(frontend.SinabsNet(sl.IAFRecurrent(rec_connect=nn.Linear(5, 5))), (5,))

    class Custom(SingleSpike):
        pass
    with pytest.raises(UnsupportedOp, match="spike_fn"):
        trace(frontend.SinabsNet(sl.IAF(spike_fn=Custom)), (5,))


def test_a_squeeze_layer_built_for_another_batch_runs_as_sinabs_runs_it_per_sample():
    """Built with batch_size=1 (as sinabs.from_model(batch_size=1) builds it), run on B samples (and on the
    probes' larger batch): each sample gives what the bare Sinabs layer gives at its own batch size."""
    layer = sl.IAFSqueeze(batch_size=1, spike_threshold=th(0.5))
    x = inputs(0)                                                  # [T, B, ...]
    got = frontend.SinabsNet(layer)(x)
    for b in range(B):
        frontend.reset_states(layer)
        own = layer(x[:, b])                                      # [T, ...]: one sample, batch-major is time-major
        assert torch.equal(got[:, b], own)
    assert layer.batch_size == 1 and layer.num_timesteps == -1    # the layer's own split is restored
    assert 0 < float(got.mean()) < 1                               # it fires and rests: the comparison can fail


def test_a_squeeze_layer_built_for_another_T_is_named():
    net = frontend.SinabsNet(sl.IAFSqueeze(num_timesteps=T + 1))
    with pytest.raises(BadInput, match=f"num_timesteps={T + 1}") as e:
        net(inputs(0))
    assert e.value.where == "module ''"


def test_a_network_built_for_its_training_batch_compiles_with_probes():
    """The verification appends probe samples (B grows): a network built with batch_size=B still compiles."""
    torch.manual_seed(3)
    net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), sl.IAFSqueeze(batch_size=B, spike_threshold=th(0.5)),
                        nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5),
                        sl.IAFSqueeze(batch_size=B, spike_threshold=th(0.25)))
    c = spikec.compile(net, cnn_inputs(), targets=("onnx",))
    assert c.equivalent


def test_a_checkpoint_saved_after_a_forward_loads_its_weights_not_its_state(tmp_path):
    trained = cnn()
    with torch.no_grad():
        trained(torch.rand(B * T, 2, 8, 8))          # v_mem is now batch-shaped, and saved with the weights
    assert trained[1].v_mem.shape == (B, 4, 8, 8)
    bare = tmp_path / "bare.pt"
    torch.save(trained.state_dict(), bare)
    model = frontend.SinabsNet(_fresh_cnn())
    assert not torch.equal(model.net[0].weight, trained[0].weight)
    loader.load_weights(model, str(bare))       # the bare network's keys, its batch-shaped v_mem among them
    assert torch.equal(model.net[0].weight, trained[0].weight) and torch.equal(model.net[4].bias, trained[4].bias)
    assert model.net[1].v_mem.shape == (0,)
    wrapped = tmp_path / "wrapped.pt"
    torch.save(frontend.SinabsNet(trained).state_dict(), wrapped)
    assert not frontend.state_keys(frontend.SinabsNet(trained)) & set(torch.load(wrapped))
    c = spikec.compile(frontend.SinabsNet(_fresh_cnn()), cnn_inputs(), weights=wrapped, targets=("onnx",))
    assert c.equivalent
    assert frontend.state_keys(trained) == {"1.v_mem", "5.v_mem"}


def _fresh_cnn():
    torch.manual_seed(9)  # other weights than cnn(): loading must replace them
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), sl.IAFSqueeze(num_timesteps=T, spike_threshold=th(0.5)),
                         nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5),
                         sl.IAFSqueeze(num_timesteps=T, spike_threshold=th(0.25)))


def test_a_network_of_batch_first_layers_compiles_equivalent_on_onnx():
    """Sinabs's plain layers on [B, T, N]: Linear runs on the last dim, the neurons on the batch-first sequence."""
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(6, 8), sl.LIF(tau_mem=3.0, spike_fn=SingleSpike, spike_threshold=th(0.2)),
                        nn.Linear(8, 3), sl.IAF(spike_threshold=th(0.25)))
    x = (np.random.default_rng(4).random((T, B, 6)) < 0.5).astype(np.float32)
    c = spikec.compile(frontend.SinabsNet(net), x, targets=("onnx",))
    assert frontend.SinabsNet(net).layout == "B,T"
    assert c.equivalent and c.targets["onnx"]["spike_exact"]
    out = c.run(x)
    assert out.any() and not out.all()


@pytest.mark.parametrize("layer", ["IAF multi", "LIF train_alphas", "LIF max subtract_value", "ExpLeak norm min"])
def test_the_one_step_streaming_onnx_model_repeats_the_run(layer, monkeypatch):
    """The emitter's state form (Builder.state / update_state), stepped by onnxruntime one step at a time."""
    from spikec.targets.onnx import streaming
    monkeypatch.setattr(streaming, "STEP_FORMS", streaming.STEP_FORMS | {"lif_sinabs"})
    graph = trace(frontend.SinabsNet(LAYERS[layer][0]()), SHAPE, input_kind="real")
    x = inputs(11).numpy()
    report, _ = streaming.streaming_result(graph, x, run(graph, x), "float64")
    assert report["written"] and report["equivalent"] and report["max_rel_diff"] == 0.0, report


def test_adapt_wraps_a_bare_sinabs_network_once(tmp_path):
    bare = cnn()
    wrapped = frontend.adapt(bare)
    assert isinstance(wrapped, frontend.SinabsNet) and wrapped.net is bare and wrapped.layout == "B*T"
    assert frontend.adapt(wrapped) is wrapped and frontend.adapt(nn.Sequential(wrapped)).__class__ is nn.Sequential
    plain = nn.Sequential(nn.Linear(3, 3))
    assert frontend.adapt(plain) is plain
    path = tmp_path / "bare.pt"
    torch.save(bare.state_dict(), path)
    c = spikec.compile(frontend.adapt(_fresh_cnn()), cnn_inputs(), weights=path, targets=("onnx",))
    assert c.equivalent and np.array_equal(c.run(cnn_inputs()), spikec.compile(
        frontend.SinabsNet(cnn()), cnn_inputs(), targets="none").run(cnn_inputs()))


def test_single_spike_layers_become_lif_and_reach_every_target():
    """IAF / LIF with SingleSpike (subtract of a float32 threshold, or reset to 0) are the built-in lif."""
    torch.manual_seed(4)
    net = nn.Sequential(nn.Linear(6, 8), sl.IAF(spike_fn=SingleSpike, spike_threshold=th(0.5)),
                        nn.Linear(8, 3), sl.LIF(tau_mem=2.0, spike_fn=SingleSpike, reset_fn=MembraneReset(),
                                                norm_input=False, spike_threshold=th(0.25)))
    x = (np.random.default_rng(5).random((T, B, 6)) < 0.5).astype(np.float32)
    c = spikec.compile(frontend.SinabsNet(net), x, targets=("onnx", "nir", "lava"))
    assert [n.op for n in c.graph.nodes if n.op in ("lif", "lif_sinabs")] == ["lif", "lif"]
    assert c.equivalent, {t: {k: r.get(k) for k in ("refused", "reason", "equivalent")} for t, r in c.targets.items()}
    out = c.run(x)
    assert out.any() and not out.all()


def test_repeat_runs_its_module_per_step_in_a_batch_first_network():
    """Sinabs's Repeat(Conv2d) between plain layers on [B, T, C, H, W]."""
    torch.manual_seed(6)
    net = nn.Sequential(sl.Repeat(nn.Conv2d(2, 3, 3, padding=1)), sl.IAF(spike_threshold=th(0.5)),
                        sl.Repeat(nn.Sequential(nn.AvgPool2d(2), nn.Flatten())),
                        sl.LIF(tau_mem=2.0, spike_threshold=th(0.125)))
    x = (np.random.default_rng(6).random((T, B, 2, 6, 6)) < 0.5).astype(np.float32)
    c = spikec.compile(frontend.SinabsNet(net), x, targets=("onnx",))
    assert c.equivalent and c.targets["onnx"]["spike_exact"]
    assert [n.op for n in c.graph.nodes if n.op != "input"] == ["conv2d", "lif_sinabs", "avgpool2d", "flatten",
                                                                 "lif_sinabs"]
    out = c.run(x)
    assert out.any() and not out.all()
    with pytest.raises(UnsupportedOp, match="Repeat"):
        trace(frontend.SinabsNet(nn.Sequential(sl.Repeat(nn.Linear(5, 5)), sl.IAFSqueeze(num_timesteps=T))), (5,))


def test_a_bare_network_keeps_what_it_declares_of_its_inputs():
    """A bare Sinabs network with ``input_shape`` and ``steps`` (as a factory sets them) is wrapped in SinabsNet and
    still declares them: the CLI compiles it with no --input-shape (it said "the per-step input shape is unknown")."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), sl.IAFSqueeze(batch_size=4), nn.Flatten(),
                        nn.Linear(4 * 6 * 6, 3, bias=False), sl.IAFSqueeze(batch_size=4))
    net.input_shape, net.steps = (2, 6, 6), 5
    wrapped = frontend.adapt(net)
    assert isinstance(wrapped, frontend.SinabsNet) and wrapped.input_shape == (2, 6, 6) and wrapped.steps == 5
    assert frontend.adapt(nn.Sequential(nn.Linear(2, 2), sl.IAF())).__dict__.get("input_shape") is None
    c = spikec.compile(net)
    assert c.equivalent and c.report["input"]["steps"] == 5 and c.report["input"]["shape"] == [2, 6, 6]


def test_from_models_network_object_is_its_spiking_model():
    """``sinabs.from_model(ann, ...)`` returns a ``sinabs.network.Network`` whose forward is its spiking model: it
    compiles as that, equivalent to Sinabs's own run of the Network, and its checkpoint (``spiking_model.*`` and
    ``analog_model.*`` keys) is the Network's."""
    import sinabs
    torch.manual_seed(0)
    ann = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3), nn.ReLU())
    with torch.no_grad():
        ann[0].weight.abs_()
    net = sinabs.from_model(ann, input_shape=(1, 8, 8), num_timesteps=5, add_spiking_output=True)
    x = (np.random.default_rng(0).random((5, 2, 1, 8, 8)) < 0.5).astype(np.float64)
    c = spikec.compile(net, x, targets=())
    assert c.equivalent
    frontend.reset_states(net)
    with torch.no_grad():   # Sinabs's own run, in its layout ([B*T, ...] for a Squeeze network), float32
        xs = torch.as_tensor(x, dtype=torch.float32).transpose(0, 1).flatten(0, 1)
        want = net(xs).unflatten(0, (2, 5)).transpose(0, 1).numpy()
    assert want.sum() > 0
    np.testing.assert_array_equal(c.run(x), want)   # spike counts
