"""The chips' limits, one table with where each number comes from.

Sources are files of rockpool 3.1.0 (``rockpool/...``) and measurements of ``xylosim`` 0.1.3's C++ core
(``xylosim.v2``, the back-end of Rockpool's ``syns61201.XyloSim``) made while writing this target and held by
``tests/targets/xylo/test_xylo_arithmetic.py`` (which drives XyloSim at each limit).
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    value: int
    source: str


@dataclass(frozen=True)
class Chip:
    name: str
    rockpool_module: str       # the chip's Rockpool package
    sim_module: str            # the module whose XyloSim simulates it (all three run on xylosim.v2)
    limits: dict

    def __getitem__(self, key: str) -> int:
        return self.limits[key].value

    def table(self) -> dict:
        return {k: {"value": v.value, "source": v.source} for k, v in self.limits.items()}


_MAPPER = "rockpool/devices/xylo/syns61201/xylo_mapper.py"
_QUANT = "rockpool/transform/quantize_methods.py (global_quantize)"
_SIM = "measured in xylosim.v2 through syns61201.XyloSim (tests/targets/xylo/test_xylo_arithmetic.py)"

XYLO_AUDIO_2 = Chip("Xylo Audio 2 (SYNS61201)", "rockpool.devices.xylo.syns61201",
                    "rockpool.devices.xylo.syns61201.xylo_sim", {
    "inputs": Limit(16, f"{_MAPPER}: le_16_input_channels"),
    "hidden_neurons": Limit(1000, f"{_MAPPER}: mapper(max_hidden_neurons=1000, 'matching Xylo hardware')"),
    "output_neurons": Limit(8, f"{_MAPPER}: le_8_output_channels, mapper(max_output_neurons=8)"),
    "synapses_per_hidden_neuron": Limit(2, "rockpool/devices/xylo/__init__.py: 'Two synapses per neuron' "
                                           "(Isyn, Isyn2; spikec uses the first)"),
    "synapses_per_output_neuron": Limit(1, "syns61201/xylo_sim.py from_specification: dash_syn_out, one per "
                                           "output neuron"),
    "weight_bits": Limit(8, f"{_QUANT}: bits_per_weight=8 (signed: -128..127); xylo_samna.py 'quantised 8-bit'"),
    "weight_shift_max": Limit(7, "syns61201/xa2_devkit_utils.py: CTRL1 weight bit-shift fields value[4:7], "
                                 "value[8:11], value[12:15] (3 bits each)"),
    "threshold_bits": Limit(16, f"{_QUANT}: bits_per_threshold=16 (signed)"),
    "bias_bits": Limit(16, "syns61201/xa2_devkit_utils.py reads the neuron state RAMs as int16; spikec keeps "
                           "biases in the state's range"),
    "state_bits": Limit(16, f"{_SIM}: Isyn and Vmem saturate at -32768..32767; xa2_devkit_utils.py reads "
                            "them as int16"),
    "dash_max": Limit(15, "spikec's bound (a 4-bit field assumed, not read from a "
                          "Rockpool source); dash 0..15 measured in xylosim.v2"),
    "max_hidden_spikes_per_step": Limit(31, f"rockpool/nn/modules/torch/lif_bitshift_torch.py: "
                                            f"max_spikes_per_dt=31; {_SIM}"),
    "max_output_spikes_per_step": Limit(1, _SIM),
    "max_input_events_per_step": Limit(15, "syns61201/xylo_samna.py evolve: 'Up to 15 input events can be sent "
                                           f"per bin'; {_SIM}: more are taken as 15"),
})

_SHARED = ("weight_bits", "weight_shift_max", "threshold_bits", "bias_bits", "state_bits", "dash_max",
           "max_hidden_spikes_per_step", "max_output_spikes_per_step", "synapses_per_output_neuron",
           "max_input_events_per_step")
_SAME_CORE = "; the same xylosim.v2 core, spikec's reference measured bit-exact on it (tests/targets/xylo)"


def _derived(name: str, module: str, sim: str, own: dict) -> Chip:
    shared = {k: Limit(v.value, v.source + _SAME_CORE) for k, v in XYLO_AUDIO_2.limits.items() if k in _SHARED}
    return Chip(name, module, sim, {**own, **shared})


_IMU = "rockpool/devices/xylo/syns63300/xylo_mapper.py"
_A3 = "rockpool/devices/xylo/syns65302/xylo_mapper.py"
XYLO_IMU = _derived("Xylo IMU (SYNS63300)", "rockpool.devices.xylo.syns63300", "rockpool.devices.xylo.syns63300.xylo_sim", {
    "inputs": Limit(16, f"{_IMU}: le_16_input_channels"),
    "hidden_neurons": Limit(496, f"{_IMU}: mapper(max_hidden_neurons=496)"),
    "output_neurons": Limit(16, f"{_IMU}: le_16_output_channels, mapper(max_output_neurons=16)"),
    "input_expansion_neurons": Limit(128, f"{_IMU}: le_128_input_expansion_neurons"),
    "output_expansion_neurons": Limit(128, f"{_IMU}: le_128_output_expansion_neurons"),
    "synapses_per_hidden_neuron": Limit(1, "rockpool/devices/xylo/__init__.py: 'One synapse per neuron'"),
})
# Rockpool simulates Xylo Audio 3 with Xylo IMU's XyloSim (syns65302/__init__.py: from ..syns63300 import XyloSim)
XYLO_AUDIO_3 = _derived("Xylo Audio 3 (SYNS65302)", "rockpool.devices.xylo.syns65302",
                        "rockpool.devices.xylo.syns63300.xylo_sim", {
    "inputs": Limit(16, f"{_A3}: le_16_input_channels"),
    "hidden_neurons": Limit(992, f"{_A3}: mapper(max_hidden_neurons=992)"),
    "output_neurons": Limit(32, f"{_A3}: mapper(max_output_neurons=32)"),
    "input_expansion_neurons": Limit(128, f"{_A3}: le_128_input_expansion_neurons"),
    "output_expansion_neurons": Limit(128, f"{_A3}: le_128_output_expansion_neurons"),
    "synapses_per_hidden_neuron": Limit(2, "rockpool/devices/xylo/__init__.py: 'Two synapses per neuron'"),
})

CHIPS = {"xylo-audio-2": XYLO_AUDIO_2, "xylo-audio-3": XYLO_AUDIO_3, "xylo-imu": XYLO_IMU}
DEFAULT_CHIP = "xylo-audio-2"

# Published energy figures (the only ones spikec cites; ``energy.py`` turns them into a labelled estimate).
# Bos & Muir (SynSense), "Micro-power spoken keyword spotting on Xylo Audio 2", arXiv:2406.15112 (June 2024):
# the Aloha keyword-spotting benchmark deployed on the Xylo Audio 2 dev kit, real continuous power measured.
ENERGY = {
    "xylo-audio-2": {"dynamic_power_uW": 291.0, "energy_per_inference_uJ": 6.6,
                     "network": "SynSense's Aloha keyword-spotting SNN (16 input channels), measured on the chip",
                     "source": "H. Bos, D. R. Muir, 'Micro-power spoken keyword spotting on Xylo Audio 2', "
                               "arXiv:2406.15112 (2024): dynamic inference power 291 uW, 6.6 uJ/inference"},
}
