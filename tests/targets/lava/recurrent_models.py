"""Small recurrent snnTorch networks for the Lava target (``recurrent_models.py:factory``), stepped with
``init_hidden``: RLeaky (one_to_one V, all-to-all linear), RSynaptic (linear, conv2d). Every factory is
argument-free and deterministic; weights are scaled so that the neurons fire and rest on binary inputs, and the
recurrent weights are large enough to change spikes (``zero_recurrence`` zeroes them for the control run).
"""
import torch
from torch import nn

N_IN, HIDDEN, N_OUT = 12, 10, 6


def _init(model, seed, gain=1.6, bias=0.1, rec_gain=0.8):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                fan_in = m.weight[0].numel()
                k = rec_gain if ".recurrent" in f".{name}" else gain
                m.weight.copy_((torch.rand(m.weight.shape, generator=g) * 2 - 1.0) * k / fan_in ** 0.5
                               + (0.25 * k / fan_in ** 0.5 if k == gain else 0.0))
                if m.bias is not None:
                    m.bias.copy_((torch.rand(m.bias.shape, generator=g) * 2 - 1) * bias)
    return model


def zero_recurrence(model):
    """The same network with every recurrent weight (and V) zeroed: the control that recurrence matters."""
    with torch.no_grad():
        for name, m in model.named_modules():
            if ".recurrent" in f".{name}" and isinstance(m, (nn.Linear, nn.Conv2d)):
                m.weight.zero_()
            if hasattr(m, "V") and isinstance(getattr(m, "V"), torch.Tensor):
                m.V.zero_()
    return model


def rleaky_mixed():
    """Linear -> RLeaky(one_to_one, V per neuron) -> Linear -> RLeaky(all-to-all linear)."""
    import snntorch as snn
    torch.manual_seed(0)
    v = torch.linspace(-0.6, 0.6, HIDDEN)
    net = nn.Sequential(nn.Linear(N_IN, HIDDEN),
                        snn.RLeaky(beta=0.8, V=v, all_to_all=False, init_hidden=True),
                        nn.Linear(HIDDEN, N_OUT),
                        snn.RLeaky(beta=0.7, linear_features=N_OUT, init_hidden=True))
    return _init(net, 3)


def rsynaptic_linear():
    """Linear -> RSynaptic(all-to-all linear) -> Linear -> RSynaptic(linear)."""
    import snntorch as snn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(N_IN, HIDDEN),
                        snn.RSynaptic(alpha=0.6, beta=0.8, linear_features=HIDDEN, init_hidden=True),
                        nn.Linear(HIDDEN, N_OUT),
                        snn.RSynaptic(alpha=0.5, beta=0.7, linear_features=N_OUT, init_hidden=True))
    return _init(net, 4, gain=1.2)


def rsynaptic_conv():
    """Conv2d -> RSynaptic(conv2d 3x3) -> Flatten -> Linear -> Leaky, on (1, 6, 6) frames."""
    import snntorch as snn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1),
                        snn.RSynaptic(alpha=0.6, beta=0.8, conv2d_channels=2, kernel_size=3, init_hidden=True),
                        nn.Flatten(), nn.Linear(72, N_OUT), snn.Leaky(beta=0.8, init_hidden=True))
    return _init(net, 5, gain=1.0, rec_gain=1.5)


def rleaky_mixed_norec():
    return zero_recurrence(rleaky_mixed())


def rsynaptic_linear_norec():
    return zero_recurrence(rsynaptic_linear())


def rsynaptic_conv_norec():
    return zero_recurrence(rsynaptic_conv())


def alpha():
    """Linear -> Alpha (two synaptic currents): refused by the Lava target."""
    import snntorch as snn
    torch.manual_seed(0)
    return _init(nn.Sequential(nn.Linear(N_IN, HIDDEN), snn.Alpha(alpha=0.8, beta=0.6, init_hidden=True)), 6)
