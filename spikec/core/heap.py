"""Freed memory kept for the next node output during a compile, within a bound (glibc only; elsewhere nothing).

A run allocates one fresh tensor per node output and the convolutions their im2col buffers: tens to hundreds of
MB each, above glibc's mmap threshold (32 MB at most), so each is a fresh mapping whose pages the kernel faults in
and zeroes, then unmaps when it is freed; on RIPE published that was a third of the compile's CPU, mostly in the
kernel. Inside ``kept()`` glibc serves every allocation from its heap and keeps what is freed (``mallopt``:
``M_MMAP_MAX`` 0, ``M_TRIM_THRESHOLD`` beyond reach), so the next node output reuses those pages. What is kept
free is bounded: ``bound()``, called between nodes and stages, returns the free pages to the system
(``malloc_trim(0)``) once the resident memory exceeds the most the compile has had in use by more than the slack (512
MiB, or an eighth of the memory available when the compile starts, whichever is less); the peak is then at most
that high-water mark plus the slack (benchmarks/README.md, ``bench_ripe.py``: on RIPE published the CLI's system time 7.7 -> 1.6-2.5 s; a
512 MiB slack trimmed 8-12 times a compile and gave back most of the gain, 1 GiB let the peak reach 3.01 GB). On
leaving, glibc's defaults are set again (its dynamic mmap threshold, which any ``mallopt`` turns off, stays at its
default of 128 kB) and the free pages are returned.

Values are unchanged: only where the allocator places them differs.
"""
import ctypes
import ctypes.util
import os
from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4        # mallopt parameters (malloc.h)
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536
NEVER_TRIM = 2 ** 31 - 1                     # mallopt takes an int
SLACK = 512 * 2 ** 20                        # free resident bytes kept at most (or an eighth of what is available)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


_state: dict = {}   # while kept: libc, slack, the resident bytes that malloc does not account for


def _glibc():
    if os.name != "posix" or not hasattr(os, "sysconf"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        return libc
    except (OSError, AttributeError):  # not glibc, or older than 2.33 (no mallinfo2)
        return None


def _resident() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _available() -> int:
    """MemAvailable of /proc/meminfo in bytes (SLACK * 8 when it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return SLACK * 8


def _in_use(libc) -> int:
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


@contextmanager
def kept(slack: int | None = None):
    """Keep freed memory for reuse, at most ``slack`` bytes (default ``SLACK``) of it resident (see the module
    docstring); nested, the outer one rules."""
    slack = min(SLACK, _available() // 8) if slack is None else slack
    libc = _glibc() if not _state else None
    resident = _resident() if libc is not None else None
    if libc is None or resident is None:
        yield
        return
    _state.update(libc=libc, slack=slack, other=resident - _in_use(libc), high=_in_use(libc))
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, NEVER_TRIM)
    try:
        yield
    finally:
        _state.clear()
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)


def bound() -> None:
    """Inside ``kept()``: return the free pages to the system when what is resident exceeds the most the compile
    has had in use so far by more than the slack (free pages below that level cost no more memory than the compile
    already needed)."""
    if not _state:
        return
    libc, resident = _state["libc"], _resident()
    in_use = _in_use(libc)
    _state["high"] = max(_state["high"], in_use)
    if resident is not None and resident - _state["other"] > _state["high"] + _state["slack"]:
        libc.malloc_trim(0)
