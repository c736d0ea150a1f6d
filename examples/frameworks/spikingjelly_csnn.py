"""SpikingJelly's convolutional SNN, as its users write it: ``layer.*`` wrappers and neurons in one
``nn.Sequential``, multi-step (``functional.set_step_mode(net, 'm')``) or single-step (``'s'``).

    spikec compile examples/frameworks/spikingjelly_csnn.py:multistep --weights CKPT --inputs X.npz --stepping multistep
    spikec compile examples/frameworks/spikingjelly_csnn.py:single_step --weights CKPT --inputs X.npz --stepping step

``X.npz`` holds ``input`` shaped ``[T, B, 1, 12, 12]``.
"""
import torch
from spikingjelly.activation_based import functional, layer, neuron, surrogate
from torch import nn


def _net(step_mode):
    torch.manual_seed(0)
    net = nn.Sequential(
        layer.Conv2d(1, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8),
        neuron.IFNode(surrogate_function=surrogate.ATan()), layer.MaxPool2d(2),
        layer.Conv2d(8, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8),
        neuron.LIFNode(tau=2.0, surrogate_function=surrogate.ATan()), layer.MaxPool2d(2),
        layer.Flatten(), layer.Linear(8 * 3 * 3, 10), neuron.LIFNode(tau=2.0, decay_input=False))
    functional.set_step_mode(net, step_mode)
    return net


def multistep():
    return _net("m")


def single_step():
    return _net("s")


def lava_ready():
    """The same shape with neurons that map onto spikec's own ``lif`` op, which reaches Loihi through Lava:
    ``IFNode`` with a soft or zero reset, ``LIFNode(tau=2.0, decay_input=False)`` with ``v_reset`` 0 or None."""
    torch.manual_seed(0)
    net = nn.Sequential(
        layer.Conv2d(1, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8), neuron.IFNode(v_reset=None),
        layer.MaxPool2d(2), layer.Flatten(), layer.Linear(8 * 6 * 6, 10),
        neuron.LIFNode(tau=2.0, decay_input=False, v_reset=0.0))
    functional.set_step_mode(net, "m")
    return net
