"""spikec: a neuromorphic deployment compiler that proves every rewrite and backend equivalent."""


def load(outdir):
    """The integer reference of a Lava compile in ``outdir``, batched and Lava-free (``model(x, dequantize=True)``)."""
    from spikec.targets.lava import load as _load
    return _load(outdir)
