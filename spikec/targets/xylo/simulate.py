"""Run a spec on Rockpool's XyloSim (``xylosim.v2``, the C++ bit-accurate core) and on spikec's reference, sample
by sample, and compare every recorded state bit for bit; compare the chip's spikes with the source's (labelled
approximate: the float network and the integer chip differ by construction, see ``APPROXIMATIONS``)."""
import numpy as np

from spikec.ir.errors import BadInput
from spikec.targets.xylo import reference
from spikec.targets.xylo._shim import import_xylosim

# XyloSim's record keys -> the reference's fields (hidden spike counts, currents, membranes; outputs)
RECORDED = {"Spikes": "spikes", "Isyn": "isyn", "Vmem": "vmem", "Isyn_out": "isyn_out", "Vmem_out": "vmem_out"}
LAG = 1   # the chip's output lags the source's by one step: hidden spikes reach the output neurons a step later
# why the chip is not the float source, each with the condition it holds under (the report lists the ones that do)
APPROXIMATIONS = {
    "reset_delay": "snnTorch's delayed reset subtracts theta from the undecayed membrane one step after the spike; "
                   "Xylo subtracts at once, so the next step's leak also acts on the subtraction (differs by "
                   "(1 - beta) * theta)",
    "spikes": "snnTorch fires on mem > theta, at most once a step; a Xylo hidden neuron fires floor(Vmem / theta) "
              "times (up to 31), an output neuron on Vmem >= theta",
    "leak": "Xylo's leak is a floored shift that takes at least 1 off a positive value; states saturate at 16 bits",
    "rounding": "weights, thresholds and biases are rounded to Xylo's integers (quantize.py)",
    "decay": "a decay is not 1 - 2**-k: rounded to the nearest shift (quantize.py: *_exact_as_shift false)",
    "no_synapse": "Leaky and RLeaky have no synaptic state; on Xylo their input passes through a current that "
                  "spreads it over the following steps (dash_syn 1)",
    "synaptic_bias": "a Synaptic layer's bias builds up in its current; on Xylo it is a constant membrane bias",
    "lag": "the output layer receives the hidden spikes one step later than in the source (the raster carries one "
           "empty step more so every source step is compared)",
}


def approximations(mapped, qreport: dict) -> list[str]:
    """The reasons of ``APPROXIMATIONS`` that hold for this network (exactness is refused with them)."""
    pops = (mapped.hidden, mapped.output)
    holds = {"reset_delay": any(p.reset_delay for p in pops), "spikes": True, "leak": True, "rounding": True,
             "decay": not all(r["beta_exact_as_shift"] and (r["alpha"] is None or r["alpha_exact_as_shift"])
                              for r in qreport.values()),
             "no_synapse": any(p.alpha is None for p in pops),
             "synaptic_bias": any(p.alpha is not None and p.bias.any() for p in pops), "lag": True}
    return [APPROXIMATIONS[k] for k, v in holds.items() if v]


def raster(inputs, n_in: int, where: str, max_events: int = 15) -> np.ndarray:
    """The verification inputs [T, B, C] as Xylo's event counts [B, T + LAG, C] (LAG empty steps appended); at
    most ``max_events`` a channel a step (the chip takes more as that many: refused, not clipped)."""
    x = np.asarray(inputs if not isinstance(inputs, dict) else next(iter(inputs.values())), np.float64)
    if x.ndim != 3 or x.shape[2] != n_in:
        raise BadInput(f"the inputs are {list(x.shape)}; the xylo target runs [T, B, {n_in}]", where=where,
                       remedy=f"give inputs of shape [T, B, {n_in}]")
    counts = np.round(x)
    if np.any(counts != x) or np.any(x < 0):
        raise BadInput("Xylo's input channels take event counts (non-negative integers); the inputs are not",
                       where=where, remedy="feed spike events (0/1 or small counts)")
    if counts.size and counts.max() > max_events:
        raise BadInput(f"an input channel carries {int(counts.max())} events in one step; Xylo takes at most "
                       f"{max_events} (limits.py max_input_events_per_step)", where=where,
                       remedy=f"feed at most {max_events} events per channel per step")
    pad = np.zeros((LAG, *x.shape[1:]))
    return np.concatenate([counts, pad]).astype(np.int64).transpose(1, 0, 2)


def xylosim_runs(spec: dict, rasters: np.ndarray, sim_module: str | None = None) -> list[dict]:
    """XyloSim (of ``sim_module``, Xylo Audio 2's by default) built from ``spec`` (``from_specification(**spec)``),
    run on each sample from reset."""
    sim = (import_xylosim(sim_module) if sim_module else import_xylosim()).from_specification(**spec)
    runs = []
    for r in rasters:
        sim.reset_state()
        out, _, rec = sim.evolve(r, record=True)
        runs.append({"out": np.asarray(out, np.int64),
                     **{v: np.asarray(rec[k], np.int64).reshape(len(r), -1) for k, v in RECORDED.items()}})
    return runs


def reference_runs(spec: dict, rasters: np.ndarray) -> list[dict]:
    runs = []
    for r in rasters:
        run = reference.run(spec, r)
        runs.append({k: getattr(run, k) for k in ("out", *RECORDED.values())})
    return runs


def compare_runs(a: list[dict], b: list[dict]) -> dict:
    """Bit for bit over every sample and recorded state; the first differences, named."""
    first, values = [], 0
    for i, (ra, rb) in enumerate(zip(a, b)):
        for k in ra:
            values += ra[k].size
            if ra[k].shape != rb[k].shape:
                first.append(f"sample {i} {k}: shape {ra[k].shape} vs {rb[k].shape}")
            elif not np.array_equal(ra[k], rb[k]):
                t, n = np.argwhere(ra[k] != rb[k])[0]
                first.append(f"sample {i} {k}: step {t} neuron {n}: {ra[k][t, n]} vs {rb[k][t, n]}")
    return {"bit_exact": not first and len(a) == len(b), "samples": len(a), "values_compared": values,
            "first_mismatches": first[:5]}


def agreement(runs: list[dict], hidden_src: np.ndarray, out_src: np.ndarray, reasons: list[str]) -> dict:
    """The chip's spikes against the float source's ([T, B, N] each), labelled approximate."""
    chip_h = np.stack([r["spikes"] for r in runs], 1)[: hidden_src.shape[0]]
    chip_o = np.stack([r["out"] for r in runs], 1)[LAG:LAG + out_src.shape[0]]
    src_h, src_o = hidden_src != 0, out_src != 0
    return {
        "approximate": True,
        "output_spike_agreement": float(np.mean((chip_o != 0) == src_o)),
        "output_spikes": {"source": int(src_o.sum()), "chip": int(chip_o.sum())},
        "hidden_spike_agreement": float(np.mean((chip_h != 0) == src_h)),
        "hidden_spikes": {"source": int(src_h.sum()), "chip_events": int(chip_h.sum()),
                          "chip_steps_with_several": int((chip_h > 1).sum())},
        "output_lag_steps": LAG,
        "exact_vs_source": False,
        "why_not_exact": reasons,
    }
