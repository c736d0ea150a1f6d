"""onnxruntime sessions for the ONNX target's checks: one place that creates them, with the thread count and reuse.

A session runs with ``intra_op_num_threads`` = torch's thread count in this process (the data-set workers set it
to their share of the cores, so two workers do not each spin a pool over every core). Inside ``reused()`` a
process keeps one session per model and thread count: a data-set shard checks the same model chunk after chunk,
and creating the session was a sixth of a shard's time. Outside it nothing is kept (a compile's session, whose
arena holds the activations of a whole run, is released with it).
"""
import contextlib
import hashlib

_KEPT: dict | None = None   # (sha1 of the model bytes, threads) -> session, inside reused()


def session(data: bytes):
    """A CPU session of the serialized model ``data``."""
    import onnxruntime as ort
    import torch
    threads = torch.get_num_threads()
    key = (hashlib.sha1(data).hexdigest(), threads) if _KEPT is not None else None
    if key is not None and key in _KEPT:
        return _KEPT[key]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    if key is not None:
        _KEPT[key] = sess
    return sess


@contextlib.contextmanager
def reused():
    """Within: sessions are kept per model and thread count, and released at the end."""
    global _KEPT
    outer = _KEPT
    _KEPT = {} if outer is None else outer
    try:
        yield
    finally:
        if outer is None:
            _KEPT = None
