"""Norse, as its users write it: a ``SequentialState`` of layers and cells, stepped with explicit state
(``out, state = net(x[t], state)``).

    spikec compile examples/frameworks/norse_step.py:net --weights CKPT --inputs X.npz --stepping step

``X.npz`` holds ``input`` shaped ``[T, B, 32]``; spikec threads the returned state from step to step.
"""
import norse.torch as norse
import torch
from torch import nn


def net():
    torch.manual_seed(0)
    return norse.SequentialState(nn.Linear(32, 24), norse.LIFCell(), nn.Linear(24, 10),
                                 norse.LICell(norse.LIParameters(tau_mem_inv=torch.tensor(50.0))))
