"""spikec.core.heap: inside kept() glibc serves large allocations from its heap (no fresh mapping per tensor)
and keeps freed pages, bound() returns them beyond the slack, and leaving restores glibc's defaults; runs are
bit-identical inside and outside."""
import subprocess
import sys

import numpy as np
import pytest

from spikec.core import heap
from spikec.core.builder import GraphBuilder
from spikec.core.interpreter import run

libc = heap._glibc()
pytestmark = pytest.mark.skipif(libc is None or heap._resident() is None, reason="glibc and /proc only")
BIG = 64 * 2 ** 20  # above glibc's largest mmap threshold (32 MB)


def _mapped() -> int:
    return libc.mallinfo2().hblkhd


_FRESH_PROCESS = """
import numpy as np
from spikec.core import heap
libc = heap._glibc()
BIG = %d
with heap.kept():
    before = libc.mallinfo2().hblkhd
    a = np.ones(BIG // 8)
    inside = libc.mallinfo2().hblkhd - before
    del a
before = libc.mallinfo2().hblkhd
a = np.ones(BIG // 8)
print(inside, libc.mallinfo2().hblkhd - before)
"""


def test_inside_a_large_allocation_is_no_fresh_mapping_and_outside_it_is():
    # In a fresh process: in a long-lived one (a test worker) a large free chunk left in the heap by earlier work
    # serves the allocation after leaving too, which is glibc's default behaviour, not a setting left behind.
    out = subprocess.run([sys.executable, "-c", _FRESH_PROCESS % BIG], capture_output=True, text=True, check=True)
    inside, outside = map(int, out.stdout.split())
    assert inside == 0  # from the heap
    assert outside >= BIG  # glibc's default again: its own mapping


def test_freed_pages_stay_resident_within_the_slack_and_are_returned_beyond_it():
    with heap.kept(slack=BIG // 2):
        a = np.ones(BIG // 8)
        resident = heap._resident()
        del a
        assert heap._resident() > resident - BIG // 2  # kept: nothing returned on free
        heap.bound()
        assert heap._resident() < resident - BIG // 2  # more than the slack free: returned


def test_nested_kept_leaves_the_outer_one_ruling():
    with heap.kept(slack=BIG):
        with heap.kept(slack=0):
            assert heap._state["slack"] == BIG
        assert heap._state["slack"] == BIG
    assert not heap._state


def test_a_run_is_bit_identical_inside_and_outside():
    b = GraphBuilder((2, 8, 8), input_name="x")
    c = b.add("conv", "conv2d", ["x"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
              {"weight": np.random.default_rng(0).normal(0, 0.5, (4, 2, 3, 3))})
    g = b.graph(b.add("lif", "lif", [c], {"reset": "subtract"},
                      {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 0.4, "v_reset": 0.0}))
    x = (np.random.default_rng(1).random((5, 3, 2, 8, 8)) < 0.5).astype(np.float64)
    outside = run(g, x)
    with heap.kept(slack=0):  # a trim after every node
        inside = run(g, x)
    for k, v in outside.values.items():
        assert np.array_equal(v, inside.values[k]) and np.array_equal(outside.margins.get(k), inside.margins.get(k))
