"""One exception class per failure, each naming where it happened and what to do about it.

``exit_code`` is what the CLI returns: 2 for bad input, 1 for a failed verification, 3 for a compiler bug.
"""


class SpikecError(Exception):
    exit_code = 2

    def __init__(self, what: str, *, where: str = "", remedy: str = ""):
        self.what, self.where, self.remedy = what, where, remedy
        super().__init__(self.message())

    def message(self) -> str:
        text = f"{self.where}: {self.what}" if self.where else self.what
        return f"{text}\n  remedy: {self.remedy}" if self.remedy else text


class BadInput(SpikecError):
    """The user's model, checkpoint, input file or option cannot be used."""


class ModelLoadError(BadInput):
    """The MODEL spec does not name a loadable factory, or the factory failed."""


class CheckpointError(BadInput):
    """The checkpoint cannot be loaded into the model (keys, pickles, non-finite values)."""


class UnsupportedOp(BadInput):
    """The frontend has no converter for a module or function."""


class ShapeError(BadInput):
    """A tensor reaching a node does not have the shape that node needs."""


class IRError(SpikecError):
    """The IR is malformed (failed verification, unreadable file)."""


class PassError(SpikecError):
    """A pass failed or its precondition does not hold where the user asked for it."""


class NotEquivalent(SpikecError):
    """A checked graph or target does not reproduce its source."""
    exit_code = 1


class InternalError(SpikecError):
    """A compiler bug: spikec itself failed (a target crashed on a graph it accepted, an unforeseen exception).

    Not the user's fault, so not bad input: its own exit code, so that scripts can tell the two apart."""
    exit_code = 3


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: unwind (``finally`` blocks clean up) and exit ``128 + signum``.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` in user or library code
    cannot swallow it.
    """

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by signal {signum}")
