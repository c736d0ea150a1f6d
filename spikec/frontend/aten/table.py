"""The one lowering table of the ATen capture: ``lowerings.py``'s rows and ``lowerings_tensor.py``'s (GELU,
comparisons, where, indexing, LayerNorm, math), merged here so that neither module imports the other's table."""
from spikec.frontend.aten.lowerings import (BASE, _add, _bmm, _clamp, _div, _identity, _linear, _mul, _neg, _rsub,
                                            _sub, _to_copy, _view, aten)
from spikec.frontend.aten.lowerings_tensor import TABLE

LOWERINGS = {**BASE, **TABLE}
# a captured graph's node with one of these taking a value that folds T, B and per-step dims ([T*B*N, D]) is lowered;
# any other is refused (it would read the merged dim as one)
FOLDS = frozenset({_view, _identity, _linear, _bmm, _add, _sub, _rsub, _mul, _div, _neg, _clamp, _to_copy,
                   *(LOWERINGS[op] for op in (aten.relu.default, aten.sigmoid.default, aten.tanh.default,
                                              aten.gelu.default, aten.abs.default, aten.exp.default,
                                              aten.sqrt.default, aten.pow.Tensor_Scalar))})
