"""Energy per inference where SynSense publishes a figure, labelled an estimate (``limits.ENERGY``).

The chip's dynamic power depends on the network and its activity; spikec cannot measure it without the
hardware. The estimate is the published dynamic inference power times this inference's duration
(steps x dt, the spec's dt: the chip runs in real time), beside the published figures themselves and the
activity of this network (synaptic events), so a reader can judge how alike the two networks are.
"""
import numpy as np

from spikec.targets.xylo.limits import ENERGY


def estimate(chip_key: str, runs: list[dict], steps: int, dt: float) -> dict:
    published = ENERGY.get(chip_key)
    if published is None:
        return {"estimate": True, "reported": False,
                "why": f"spikec cites no SynSense energy figure for {chip_key}; none is reported"}
    seconds = steps * dt
    events = float(np.mean([r["spikes"].sum() + r["out"].sum() for r in runs])) if runs else 0.0
    return {"estimate": True, "reported": True,
            "estimate_uJ": published["dynamic_power_uW"] * seconds,
            "how": f"published dynamic inference power {published['dynamic_power_uW']} uW x {steps} steps x "
                   f"{dt:g} s (real-time operation); not a measurement of this network",
            "published": published, "inference_seconds": seconds,
            "spikes_per_inference": events}
