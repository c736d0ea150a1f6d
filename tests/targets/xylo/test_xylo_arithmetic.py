"""Xylo Audio 2's arithmetic: spikec's integer reference (spikec/targets/xylo/reference.py, numpy, written apart
from Rockpool) against Rockpool's XyloSim on xylosim.v2 (SynSense's C++ bit-accurate core), bit for bit, on
random specifications that drive the 16-bit states into saturation; and the limits the table in limits.py
sources to a measurement here, each driven at the limit in XyloSim itself."""
import numpy as np
import pytest

pytest.importorskip("xylosim.v2")
pytest.importorskip("rockpool")

from spikec.targets.xylo import reference  # noqa: E402
from spikec.targets.xylo._shim import import_xylosim  # noqa: E402
from spikec.targets.xylo.limits import CHIPS, XYLO_AUDIO_2  # noqa: E402
from spikec.targets.xylo.simulate import compare_runs, reference_runs, xylosim_runs  # noqa: E402


def random_spec(rng, saturating: bool) -> dict:
    ni, nh, no = int(rng.integers(1, 17)), int(rng.integers(1, 30)), int(rng.integers(1, 9))
    return dict(
        weights_in=rng.integers(-128, 128, (ni, nh)), weights_out=rng.integers(-128, 128, (nh, no)),
        weights_rec=rng.integers(-128, 128, (nh, nh)) * (rng.random((nh, nh)) < 0.3),
        dash_mem=rng.integers(0, 16, nh), dash_mem_out=rng.integers(0, 16, no), dash_syn=rng.integers(0, 16, nh),
        dash_syn_2=np.zeros(nh, np.int64), dash_syn_out=rng.integers(0, 16, no),
        threshold=rng.integers(1, 40 if saturating else 3000, nh), threshold_out=rng.integers(1, 3000, no),
        bias=rng.integers(-2000, 2000, nh), bias_out=rng.integers(-2000, 2000, no),
        weight_shift_in=np.int64(rng.integers(0, 8)), weight_shift_rec=np.int64(rng.integers(0, 8)),
        weight_shift_out=np.int64(rng.integers(0, 8)), dt=np.float64(1e-3))


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_reference_is_bit_exact_against_xylosim_into_saturation(chip):
    """Each chip's XyloSim (Audio 2: syns61201's; Audio 3 and IMU: syns63300's)."""
    rng = np.random.default_rng(7)
    saturated = 0
    for trial in range(24 if chip == "xylo-audio-2" else 8):
        spec = random_spec(rng, trial % 3 == 0)
        rasters = rng.integers(0, 3, (2, 10, spec["weights_in"].shape[0]))
        sim = xylosim_runs(spec, rasters, CHIPS[chip].sim_module)
        check = compare_runs(sim, reference_runs(spec, rasters))
        assert check["bit_exact"], (trial, check["first_mismatches"])
        saturated += sum(int((np.abs(r["isyn"]) >= 32000).sum()) for r in sim)
    assert saturated > 0, "no run reached saturation: the saturation rules were not exercised"


def test_a_reference_without_its_saturation_rules_differs():
    """The comparison can fail: with plain clipping of the total (no per-source order, no saturated leak
    difference) the reference no longer matches XyloSim on the same random specifications."""
    rng = np.random.default_rng(7)
    plain = lambda state, counts, weights: reference.sat(state + counts @ weights)
    mismatched = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reference, "accumulate", plain)
        for trial in range(24):
            spec = random_spec(rng, trial % 3 == 0)
            rasters = rng.integers(0, 3, (2, 10, spec["weights_in"].shape[0]))
            mismatched += not compare_runs(xylosim_runs(spec, rasters), reference_runs(spec, rasters))["bit_exact"]
    assert mismatched > 0


def one_neuron(x, w_in=100, w_out=0, **kw):
    spec = dict(weights_in=np.array([[w_in]]), weights_out=np.array([[w_out]]), weights_rec=np.zeros((1, 1), int),
                dash_mem=np.array([15]), dash_mem_out=np.array([15]), dash_syn=np.array([15]),
                dash_syn_2=np.array([0]), dash_syn_out=np.array([15]), threshold=np.array([100]),
                threshold_out=np.array([100]), bias=np.array([0]), bias_out=np.array([0]),
                weight_shift_in=0, weight_shift_rec=0, weight_shift_out=0)
    spec.update({k: np.array(v) for k, v in kw.items()})
    out, _, rec = import_xylosim().from_specification(**spec).evolve(np.array(x), record=True)
    return np.asarray(out).ravel(), {k: np.asarray(v).ravel() for k, v in rec.items() if k != "Isyn2"}


def test_limits_measured_in_xylosim():
    x = [[1], [0], [0], [0]]
    out, rec = one_neuron(x, threshold=[1], w_out=127, threshold_out=[2])
    assert rec["Spikes"].max() == XYLO_AUDIO_2["max_hidden_spikes_per_step"] == 31
    assert out.max() == XYLO_AUDIO_2["max_output_spikes_per_step"] == 1 and rec["Vmem_out"][1] > 2
    _, rec = one_neuron([[15], [15]], w_in=127, weight_shift_in=7, threshold=[30000])   # 15 * 127 << 7 > 2**15
    assert rec["Isyn"].max() < 2 ** 15 and rec["Isyn"][0] == 2 ** 15 - 2   # saturated at 32767, then leaked 1
    _, rec = one_neuron([[15]], w_in=-128, weight_shift_in=7, threshold=[30000], dash_syn=[0], dash_mem=[0])
    assert rec["Vmem"][0] == 0 and rec["Isyn"][0] == 0   # dash 0 empties the state in one step
    assert XYLO_AUDIO_2["state_bits"] == 16 and XYLO_AUDIO_2["dash_max"] == 15


def test_one_step_delays_and_leak_rules():
    """Input reaches the hidden current in its own step; hidden spikes reach the output a step later; the leak
    takes at least 1 off a positive value (dash 15 on 5: 5, 4, 3, ...)."""
    out, rec = one_neuron([[1], [0], [0], [0]], w_in=5, w_out=50, threshold=[3], threshold_out=[10],
                          dash_syn=[15], dash_mem=[15])
    assert rec["Isyn"].tolist() == [4, 3, 2, 1]
    assert rec["Spikes"][0] >= 1 and rec["Isyn_out"][0] == 0 and rec["Isyn_out"][1] > 0
    run = reference.run({**{k: np.asarray(v) for k, v in dict(
        weights_in=[[5]], weights_out=[[50]], weights_rec=[[0]], dash_mem=[15], dash_mem_out=[15], dash_syn=[15],
        dash_syn_out=[15], threshold=[3], threshold_out=[10], bias=[0], bias_out=[0]).items()},
        "weight_shift_in": 0, "weight_shift_rec": 0, "weight_shift_out": 0}, np.array([[1], [0], [0], [0]]))
    assert run.isyn.ravel().tolist() == rec["Isyn"].tolist() and run.out.ravel().tolist() == out.tolist()
