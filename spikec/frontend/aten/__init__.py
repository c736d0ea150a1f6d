"""Torch calls with no converter of their own, captured to core ATen and lowered through one table onto IR ops.

The fx trace keeps every module with a converter (the neurons, the layers spikec maps itself) as a leaf call.
Any other call -- a torch function or tensor method not in ``FUNCTIONS`` (``torch.cat``, ``x.mean(2)``,
``x.contiguous()``), or a ``torch.nn`` module without a converter (``nn.Conv1d``, ``nn.AvgPool1d``) -- is run once
by ``make_fx`` with the core ATen decompositions on example tensors of the shapes the IR knows: the per-step shape
behind the leading dims torch sees (``[T, B]``, ``[T*B]`` merged, or the step's ``[B]``), with T and B example
sizes no per-step dim or argument uses, so every size in the captured graph is read back as a lead or a per-step
dim. Each ATen node then goes through ``LOWERINGS`` (an overload -> a function emitting IR ops with ``ctx.emit``;
``lowerings.py`` holds the table, ``lowerings_tensor.py`` the rows of GELU, masks, indexing, LayerNorm, math);
ops on constants only (a weight's transpose) are evaluated. An ATen op with no row, or a row's case it cannot map
(anything that would mix T or B into a per-step dim), is refused naming the op, the user's line and a remedy.
"""
from spikec.frontend.aten.capture import capture, capture_module  # noqa: F401
from spikec.frontend.aten.table import LOWERINGS  # noqa: F401
