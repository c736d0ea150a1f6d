"""netx HDF5 export (``OUTDIR/model.net``): the path of a deployment to Loihi 2 hardware.

netx (lava-dl 0.6.0, ``lava/lib/dl/netx/hdf5.py``) knows input, dense, conv and flatten layers with
CUBA neurons (Lava's hard-reset LIF, scalar ``vth``/``du``/``dv``, bias exponent fixed at 6) and no
pooling. ``export_info`` says whether the integer reference fits and, if not, which nodes prevent it.
"""
import numpy as np

NETX_OPS = ("input", "lava_conv", "lava_dense", "flatten", "lava_lif")


def export_info(q) -> dict:
    blocking = []
    for n in q.nodes:
        if n.op not in NETX_OPS:
            blocking.append({"node": n.name, "op": n.op,
                             "why": "not in netx's vocabulary (input, dense, conv, flatten, CUBA neurons)"})
        elif n.op == "lava_lif" and n.attrs.get("process") != "LIF":
            blocking.append({"node": n.name, "op": n.op,
                             "why": f"{n.attrs['reset']}-reset LIF with per-channel parameters or soft reset "
                                    "runs in spikec's custom SpikecLIF process; netx builds only Lava's LIF"})
        elif n.op == "lava_lif" and np.any((np.asarray(n.params["bias_mant"]) << np.asarray(n.params["bias_exp"])) % 64):
            blocking.append({"node": n.name, "op": n.op,
                             "why": "netx fixes the bias exponent at 6: biases must be multiples of 64"})
    return {"exportable": not blocking, "blocking_nodes": blocking,
            "written": None if blocking else "model.net"}


def write(q, path) -> None:  # pragma: no cover - replaced when export is implemented
    raise NotImplementedError
