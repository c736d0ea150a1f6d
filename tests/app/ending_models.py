"""Model factories whose code ends the process or raises a BaseException (loaded by path by the tests)."""
import os

import torch
from torch import nn

import spikec.nn as snn


class Custom(BaseException):
    """A BaseException of the user's own, outside the Exception hierarchy."""


def _net():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(12, 16), snn.LIF(beta=0.5, threshold=0.5), nn.Linear(16, 3))
    model.input_shape, model.steps = (12,), 4
    return model


def os_exit_0():
    os._exit(0)


def os_exit_3():
    os._exit(3)


def custom_base_exception():
    raise Custom("from the factory")


def generator_exit():
    raise GeneratorExit


class _ExitsInForward(nn.Module):
    input_shape, steps = (12,), 4

    def __init__(self, end):
        super().__init__()
        self.net, self.end, self.calls = _net(), end, 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 1:  # fx traces it first (a Proxy); the end comes on the first real run
            self.end()
        return self.net(x)


def forward_os_exit_0():
    return _ExitsInForward(lambda: os._exit(0))


def forward_custom_base_exception():
    def end():
        raise Custom("from forward")
    return _ExitsInForward(end)


def chdir_then_build():
    """A factory that moves the process elsewhere (a relative -o must not follow it)."""
    os.chdir(os.environ["SPIKEC_TEST_CHDIR"])
    return _net()


def interrupts_parent():
    """SIGINT to the console entry's parent process only (``kill -INT PID``): it must reach the command."""
    import signal
    import time
    os.kill(os.getppid(), signal.SIGINT)
    time.sleep(60)
    return _net()


def interrupts_group():
    """SIGINT to the whole process group (a terminal's Ctrl-C): the child gets it directly and forwarded."""
    import signal
    import time
    os.killpg(os.getpgid(0), signal.SIGINT)
    time.sleep(60)
    return _net()


def swallows_sigterm():
    """Code that catches everything, the interrupt included (as a ``__del__`` or a broad ``except`` does)."""
    import signal
    import time
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except BaseException:
        pass
    return _net()
