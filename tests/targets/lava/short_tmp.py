"""A run's own TMPDIR at a short path. multiprocessing's listener sockets (Lava's SharedMemoryManager) live under
TMPDIR, and an AF_UNIX path holds at most 108 bytes: under pytest-xdist, tmp_path
(``/tmp/pytest-of-USER/pytest-N/popen-gwK/<test>/``) is too deep for ``<tmp>/pymp-XXXXXXXX/listener-XXXXXXXX``."""
import atexit
import shutil
import tempfile
from pathlib import Path


def short_tmp(link: Path) -> Path:
    """A new directory under /tmp (removed at exit), linked at ``link`` so a test reads it beside its other files."""
    real = Path(tempfile.mkdtemp(prefix="sk-", dir="/tmp"))
    atexit.register(shutil.rmtree, real, True)
    link.symlink_to(real, target_is_directory=True)
    return real
