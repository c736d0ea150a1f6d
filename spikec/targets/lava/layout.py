"""Lava's array layouts: per-sample ``(W, H, C)`` arrays, conv kernels, flatten order, batch folding.

- Conv: Lava computes a true convolution in ``(W, H, C)`` layout with weights ``(C_out, kW, kH, C_in)``:
  the PyTorch kernel is flipped in both spatial axes and transposed. A Dense fed by a flattened conv
  population gets its columns permuted from PyTorch's (C, H, W) flatten order to Lava's (W, H, C) order.
- Batch: samples run side by side in one network: conv populations fold the batch into channels
  (``groups = B * groups``), dense ones into blocks (block-diagonal weights).
"""
import numpy as np


def lava_shape(ir_shape) -> list[int]:
    """IR per-sample (C, H, W) -> Lava (W, H, C); any other shape (a vector, a Conv1d's (C, L), SDT's tokens x
    dims) -> a vector in the IR's row-major order, as the samples are folded side by side (``fold_data``)."""
    return [ir_shape[2], ir_shape[1], ir_shape[0]] if len(ir_shape) == 3 else [int(np.prod(ir_shape, dtype=np.int64))]


def to_lava(a: np.ndarray) -> np.ndarray:
    """A per-sample IR-layout array (C, H, W) in Lava's (W, H, C) layout; any other shape as a vector."""
    return a.transpose(2, 1, 0) if a.ndim == 3 else a.reshape(-1)


def conv_weight_to_lava(w: np.ndarray) -> np.ndarray:
    """PyTorch (C_out, C_in, kH, kW) cross-correlation -> Lava (C_out, kW, kH, C_in) true convolution."""
    return np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(0, 3, 2, 1))


def conv_weight_from_lava(w: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(w.transpose(0, 3, 2, 1)[:, :, ::-1, ::-1])


def flatten_perm(ir_shape) -> np.ndarray:
    """``perm[j]``: the PyTorch flatten index of the neuron at Lava flatten index ``j``."""
    return np.arange(int(np.prod(ir_shape))).reshape(ir_shape).transpose(2, 1, 0).reshape(-1)


def per_neuron(p: np.ndarray, ir_shape) -> np.ndarray:
    """A () or (C,) IR parameter as a per-neuron array in Lava layout."""
    p = np.asarray(p)
    full = np.broadcast_to(p.reshape(-1, *([1] * (len(ir_shape) - 1))) if p.ndim else p, ir_shape)
    return np.ascontiguousarray(to_lava(np.array(full)))


# -- batch folding ------------------------------------------------------------------------
def fold(a: np.ndarray, batch: int) -> np.ndarray:
    """A per-neuron Lava-layout array for ``batch`` samples side by side (channels or blocks)."""
    return np.tile(a, (1, 1, batch)) if a.ndim == 3 else np.tile(a, batch)


def folded_shape(lava_shape_, batch: int) -> tuple:
    return tuple(fold(np.zeros(lava_shape_), batch).shape)


def fold_data(x: np.ndarray) -> np.ndarray:
    """``[T, B, *ir]`` -> folded Lava layout ``(*lava_folded, T)``."""
    t, b = x.shape[:2]
    if x.ndim == 5:   # (T, B, C, H, W) -> (W, H, B*C, T)
        return np.ascontiguousarray(x.transpose(4, 3, 1, 2, 0).reshape(x.shape[4], x.shape[3], b * x.shape[2], t))
    return np.ascontiguousarray(x.reshape(t, -1).T)


def unfold_data(r: np.ndarray, batch: int, ir_shape) -> np.ndarray:
    """Folded ``(*lava_folded, T)`` -> ``[T, B, *ir]``."""
    t = r.shape[-1]
    if len(ir_shape) == 3:
        c, h, w = ir_shape
        return np.ascontiguousarray(r.reshape(w, h, batch, c, t).transpose(4, 2, 3, 1, 0))
    return np.ascontiguousarray(np.moveaxis(r.reshape(batch, *ir_shape, t), -1, 0))


def unfold_state(r: np.ndarray, batch: int, ir_shape) -> np.ndarray:
    return unfold_data(np.asarray(r)[..., None], batch, ir_shape)[0]


def fold_dense(w: np.ndarray, batch: int, flatten_input: bool, input_lava_shape) -> np.ndarray:
    n_out, n_in = w.shape
    big = np.zeros((batch * n_out, batch * n_in), dtype=w.dtype)
    if flatten_input:
        wd, h, c = input_lava_shape
        j = np.arange(n_in)
        xy, ch = j // c, j % c
        for b in range(batch):
            big[b * n_out:(b + 1) * n_out, xy * batch * c + b * c + ch] = w
    else:
        for b in range(batch):
            big[b * n_out:(b + 1) * n_out, b * n_in:(b + 1) * n_in] = w
    return big

