"""Per-stage wall time, CPU time and peak memory of a compile (``report.json`` ``stages``).

Each stage is timed with ``time.perf_counter`` (``seconds``) and ``time.process_time`` (``cpu_seconds``: this
process's CPU, all threads; the figure to compare on a shared machine, where wall time includes waiting). Its peak memory is the process's resident-set high-water mark
during the stage: on Linux the mark is reset to the current resident set when the stage starts
(``echo 5 > /proc/self/clear_refs``) and ``VmHWM`` is read when it ends; where that is not possible the
figure is the process's peak so far (``ru_maxrss``), an upper bound, and the stage says so (``"peak": "process"``).
Stages do not nest: a reset inside a stage would lose the outer stage's peak.
"""
import resource
import time
from contextlib import contextmanager

from spikec.core import heap


def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current resident set
        return True
    except OSError:
        return False


class Stages:
    """Records ``{"stage", "seconds", "cpu_seconds", "peak_memory_mb"}`` for each ``with stages("name"):`` block, in order."""

    def __init__(self):
        self.records: list[dict] = []
        self._open = False

    @contextmanager
    def __call__(self, name: str):
        if self._open:
            raise RuntimeError(f"stage {name!r} started inside another stage")
        self._open = True
        heap.bound()  # what the last stage freed and a compile keeps (spikec.core.heap): within its bound
        reset = _reset_peak()
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
            peak = _status_mb("VmHWM") if reset else None
            record = {"stage": name, "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3)}
            if peak is None:
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                record["peak"] = "process"
            record["peak_memory_mb"] = round(peak, 1)
            self.records.append(record)
            self._open = False

    def to_json(self) -> list[dict]:
        return [dict(r) for r in self.records]
