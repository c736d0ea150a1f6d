"""The ops of the IR, one module per family, each op defined once (``registry.define``).

``registry`` holds ``OpDef`` and the lookup; ``common`` the helpers families share; the families
register their ops when this package is imported (they import only ``registry`` and ``common``).
"""
from spikec.ops.registry import (OPS, PER_CHANNEL, UNSPECIFIED, Cost, Decay, KernelContext, OpDef, Param,  # noqa
                                 decay_params, define, deployed_params, facts, infer_type, need, opdef,
                                 register_kernel, schema_of, time_base_ops)
from spikec.ops import synapses, norm, temporal, pooling, structure, tensor, attention, neurons  # noqa: F401,E402
