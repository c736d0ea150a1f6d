"""Small framework networks (Linear -> neuron -> Linear -> neuron) for the Lava target, loaded by path
(``framework_models.py:factory``): snnTorch (stepped, ``init_hidden``), SpikingJelly (multi-step) and Norse
(``SequentialState``, stepped). Every factory is argument-free and deterministic; weights are scaled so that
the neurons both fire and rest on the tests' binary inputs.
"""
import torch
from torch import nn

N_IN, HIDDEN, N_OUT = 12, 10, 6


def _init(model, seed, gain=1.6, bias=0.1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_((torch.rand(m.weight.shape, generator=g) * 2 - 0.8) * gain / m.in_features ** 0.5)
                if m.bias is not None:
                    m.bias.copy_((torch.rand(m.bias.shape, generator=g) * 2 - 1) * bias)
    return model


# -- snnTorch ---------------------------------------------------------------------------------
def leaky(reset="subtract", delay=True, beta=0.8, threshold=1.0):
    import snntorch as snn
    mk = lambda: snn.Leaky(beta=beta, threshold=threshold, init_hidden=True, reset_mechanism=reset,
                           reset_delay=delay)
    torch.manual_seed(0)
    return _init(nn.Sequential(nn.Linear(N_IN, HIDDEN), mk(), nn.Linear(HIDDEN, N_OUT), mk()), 1)


def leaky_default():
    return leaky()


def leaky_immediate():
    return leaky(delay=False)


def leaky_if():
    """An integrate-and-fire (beta = 1) with snnTorch's default subtract reset."""
    return leaky(beta=1.0, threshold=1.5)


def leaky_no_bias():
    """snnTorch's default Leaky behind bias-free Linears."""
    import snntorch as snn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(N_IN, HIDDEN, bias=False), snn.Leaky(beta=0.8, init_hidden=True),
                        nn.Linear(HIDDEN, N_OUT, bias=False), snn.Leaky(beta=0.8, init_hidden=True))
    return _init(net, 1)


def leaky_zero():
    return leaky(reset="zero", delay=True, beta=0.7)


def leaky_none():
    return leaky(reset="none", beta=0.6, threshold=1.5)


def synaptic(reset="subtract", delay=True):
    import snntorch as snn
    mk = lambda: snn.Synaptic(alpha=0.6, beta=0.8, threshold=1.0, init_hidden=True, reset_mechanism=reset,
                              reset_delay=delay)
    torch.manual_seed(0)
    return _init(nn.Sequential(nn.Linear(N_IN, HIDDEN), mk(), nn.Linear(HIDDEN, N_OUT), mk()), 2, gain=1.0)


def synaptic_default():
    return synaptic()


def synaptic_zero():
    return synaptic(reset="zero")


def rleaky():
    import snntorch as snn
    mk = lambda n: snn.RLeaky(beta=0.8, linear_features=n, init_hidden=True)
    torch.manual_seed(0)
    return _init(nn.Sequential(nn.Linear(N_IN, HIDDEN), mk(HIDDEN), nn.Linear(HIDDEN, N_OUT), mk(N_OUT)), 3)


# -- SpikingJelly (multi-step) ------------------------------------------------------------------
def _sj(make, seed, gain=1.6):
    from spikingjelly.activation_based import functional, layer
    torch.manual_seed(0)
    net = nn.Sequential(layer.Linear(N_IN, HIDDEN), make(), layer.Linear(HIDDEN, N_OUT), make())
    functional.set_step_mode(net, "m")
    return _init(net, seed, gain)


def sj_lif():
    from spikingjelly.activation_based import neuron
    return _sj(lambda: neuron.LIFNode(tau=3.0), 4, gain=5.0)                      # decay_input, hard reset to 0


def sj_lif_soft():
    from spikingjelly.activation_based import neuron
    return _sj(lambda: neuron.LIFNode(tau=2.5, decay_input=False, v_reset=None), 5)


def sj_plif_reset():
    from spikingjelly.activation_based import neuron
    return _sj(lambda: neuron.ParametricLIFNode(init_tau=2.0, v_reset=-0.3), 6, gain=4.0)


def sj_if_reset():
    from spikingjelly.activation_based import neuron
    return _sj(lambda: neuron.IFNode(v_reset=0.25), 7)


# -- Norse (stepped) ------------------------------------------------------------------------------
def norse_lif():
    import norse.torch as norse
    torch.manual_seed(0)
    p = norse.LIFParameters(tau_mem_inv=torch.tensor(200.0), tau_syn_inv=torch.tensor(300.0),
                            v_leak=torch.tensor(0.1), v_th=torch.tensor(0.6), v_reset=torch.tensor(-0.1))
    net = norse.SequentialState(nn.Linear(N_IN, HIDDEN), norse.LIFCell(p), nn.Linear(HIDDEN, N_OUT),
                                norse.LIFCell(p))
    return _init(net, 8, gain=6.0, bias=0.5)


def norse_lif_default():
    import norse.torch as norse
    torch.manual_seed(0)
    net = norse.SequentialState(nn.Linear(N_IN, HIDDEN), norse.LIFCell(), nn.Linear(HIDDEN, N_OUT), norse.LIFCell())
    return _init(net, 9, gain=12.0, bias=1.0)


def norse_box():
    import norse.torch as norse
    torch.manual_seed(0)
    p = norse.LIFBoxParameters(tau_mem_inv=torch.tensor(250.0), v_th=torch.tensor(0.5))
    net = norse.SequentialState(nn.Linear(N_IN, HIDDEN), norse.LIFBoxCell(p), nn.Linear(HIDDEN, N_OUT),
                                norse.LIFBoxCell(p))
    return _init(net, 10, gain=4.0)


def leaky_mem_out(reset="subtract", delay=True):
    """The last Leaky returns (spk, mem): mem is a state read-out output."""
    import snntorch as snn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(N_IN, HIDDEN), snn.Leaky(beta=0.8, init_hidden=True), nn.Linear(HIDDEN, N_OUT),
                        snn.Leaky(beta=0.8, init_hidden=True, output=True, reset_mechanism=reset, reset_delay=delay))
    return _init(net, 1)


def leaky_mem_immediate():
    return leaky_mem_out(delay=False)


def leaky_mem_zero():
    return leaky_mem_out(reset="zero")


def leaky_mem_zero_immediate():
    return leaky_mem_out(reset="zero", delay=False)


def synaptic_out(reset="subtract"):
    """The last Synaptic returns (spk, syn, mem): mem is recorded, syn (Lava's u) is not."""
    import snntorch as snn
    torch.manual_seed(0)
    mk = lambda **kw: snn.Synaptic(alpha=0.6, beta=0.8, init_hidden=True, reset_mechanism=reset, **kw)
    net = nn.Sequential(nn.Linear(N_IN, HIDDEN), mk(), nn.Linear(HIDDEN, N_OUT), mk(output=True))
    return _init(net, 2, gain=1.0)


def norse_li(leak=0.0, current=True):
    """LIF -> LI read-out (LICell, or LIBoxCell without a current), v_leak ``leak``."""
    import norse.torch as norse
    torch.manual_seed(0)
    li = norse.LICell(norse.LIParameters(tau_mem_inv=torch.tensor(50.0), v_leak=torch.tensor(leak))) if current \
        else norse.LIBoxCell(norse.LIBoxParameters(tau_mem_inv=torch.tensor(50.0), v_leak=torch.tensor(leak)))
    net = norse.SequentialState(nn.Linear(N_IN, HIDDEN), norse.LIFCell(), nn.Linear(HIDDEN, N_OUT), li)
    return _init(net, 9, gain=12.0, bias=1.0)


def norse_li_leak():
    return norse_li(leak=0.2)


def norse_libox():
    return norse_li(current=False)
