"""RIPE-MambaSpike backbone (models.md section 1): entry BNTT, three RepSpikeStages, a simple head.

A stage:  y1 = BNTT(RepConv1(TDM_l1(x)));  (S1, U1) = Neuron1(y1)
          y2 = BNTT(RepConv2(TDM_l2(S1)));  y2' = DS-MPA(U1, S1_prev, y2);  S2 = Neuron2(y2')
CSiLIF neurons in stage 1, SiLIF in stages 2 and 3. DS-MPA is dense (a host computation) and optional.
The published model continues with a multi-resolution bridge and a Mamba stack (dense host
computations); this example ends instead in a simple head: average-pool the stage-3 spikes of each
step, then Linear. The class score is the mean of the per-step logits over T (done by the caller).
"""
from torch import nn

import spikec.nn as snn


class RepSpikeStage(nn.Module):
    def __init__(self, c_in: int, c_out: int, steps: int, neuron: str, dsmpa: bool):
        super().__init__()
        make = (lambda **kw: snn.CSiLIF(c_out, **kw)) if neuron == "csilif" else (lambda **kw: snn.SiLIF(c_out, **kw))
        self.tdm1 = snn.TDM(c_in)
        self.rep1 = snn.RepConv(c_in, c_out, stride=2)
        self.bn1 = snn.BNTT(c_out, steps)
        self.neuron1 = make(return_membrane=dsmpa)
        self.tdm2 = snn.TDM(c_out)
        self.rep2 = snn.RepConv(c_out, c_out, stride=1)
        self.bn2 = snn.BNTT(c_out, steps)
        self.delay = snn.Delay(1) if dsmpa else None
        self.dsmpa = snn.DSMPA(c_out) if dsmpa else None
        self.neuron2 = make()

    def forward(self, x):
        y1 = self.bn1(self.rep1(self.tdm1(x)))
        if self.dsmpa is None:
            s1 = self.neuron1(y1)
            return self.neuron2(self.bn2(self.rep2(self.tdm2(s1))))
        s1, u1 = self.neuron1(y1)
        y2 = self.bn2(self.rep2(self.tdm2(s1)))
        return self.neuron2(self.dsmpa(u1, self.delay(s1), y2))


class RipeBackbone(nn.Module):
    def __init__(self, channels=(32, 64, 128), steps: int = 10, classes: int = 4, dsmpa: bool = True,
                 input_hw: tuple[int, int] = (128, 128)):
        super().__init__()
        self.input_shape = (2, *input_hw)
        self.steps = steps
        self.entry = snn.BNTT(2, steps)
        c_in = 2
        for k, c in enumerate(channels, start=1):
            setattr(self, f"stage{k}", RepSpikeStage(c_in, c, steps, "csilif" if k == 1 else "silif", dsmpa))
            c_in = c
        self.head = snn.TimeDistributed(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, classes))

    def forward(self, x):
        x = self.entry(x)
        x = self.stage1(x)
        x = self.stage2(x)
        x = self.stage3(x)
        return self.head(x)


def small() -> RipeBackbone:
    """What is trained and shipped: 32x32 synthetic events, T = 8, four motion directions, DS-MPA on."""
    return RipeBackbone(channels=(8, 16, 16), steps=8, classes=4, dsmpa=True, input_hw=(32, 32))


def published(steps: int = 10) -> RipeBackbone:
    """The published widths [32, 64, 128] at 128x128 with DS-MPA (untrained; for accounting and benchmarks)."""
    return RipeBackbone(channels=(32, 64, 128), steps=steps, classes=4, dsmpa=True, input_hw=(128, 128))
