"""Train the Spike-driven Transformer example (``model.py:small``) on scikit-learn's 8x8 digits.

The static image (real pixel values in [0, 1]) is repeated over T = 4 steps (models.md section 3), so the
input is ``[T, B, 1, 8, 8]`` real-valued and the first conv is the only MAC layer fed by pixels. Loss:
cross-entropy on the logits averaged over T. Writes ``checkpoint.pt`` (a state_dict) and ``inputs.npz``
(``input``: the first 16 test images repeated over T, float32 ``[4, 16, 1, 8, 8]``; ``label``).

Run from anywhere: ``.venv/bin/python examples/sdt/train.py [--epochs N] [--out DIR] [--threads K]``;
``--model FILE:FACTORY`` trains another factory (e.g. a variant of model.py) with the same recipe.
"""
import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # repo root, for `spikec` without an install

import numpy as np
import torch
import torch.nn.functional as F

from spikec.app.loader import build_model


def _digits_module():
    """examples/digits/model.py, by file path (both example directories hold a ``model.py``)."""
    path = os.path.join(os.path.dirname(HERE), "digits", "model.py")
    spec = importlib.util.spec_from_file_location("spikec_example_digits_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


load_split = _digits_module().load_split   # the fixed digits split shared with the digits example


def repeat(images: torch.Tensor, steps: int) -> torch.Tensor:
    """Static input: ``[B, 1, 8, 8]`` -> ``[T, B, 1, 8, 8]`` (the same real-valued image at every step)."""
    return images.unsqueeze(0).expand(steps, *images.shape).contiguous()


def accuracy(model, images, labels, steps, batch=256):
    model.eval()
    with torch.no_grad():
        hits = sum((model(repeat(images[i:i + batch], steps)).mean(0).argmax(1) == labels[i:i + batch]).sum().item()
                   for i in range(0, len(labels), batch))
    return hits / len(labels)


def save_atomic(path, write):
    """``write(file)`` into a temp file, then rename: never leaves a half-written file at ``path``."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--out", default=HERE, help="directory for checkpoint.pt and inputs.npz")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1 is fastest for this size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=os.path.join(HERE, "model.py:small"), help="FILE:FACTORY to train")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_tr, y_tr, x_te, y_te = load_split()
    model = build_model(args.model)
    steps = model.steps
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)

    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for idx in torch.randperm(len(y_tr)).split(args.batch):
            loss = F.cross_entropy(model(repeat(x_tr[idx], steps)).mean(0), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        print(f"epoch {epoch + 1:2d}/{args.epochs}  loss {total / len(y_tr):.3f}  "
              f"train {accuracy(model, x_tr, y_tr, steps):.4f}  test {accuracy(model, x_te, y_te, steps):.4f}  "
              f"({time.time() - start:.0f}s)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "checkpoint.pt")
    save_atomic(ckpt, lambda f: torch.save(model.state_dict(), f))
    npz = os.path.join(args.out, "inputs.npz")
    sample = repeat(x_te[:16], steps).numpy().astype(np.float32)  # [T, 16, 1, 8, 8]
    save_atomic(npz, lambda f: np.savez(f, input=sample, label=y_te[:16].numpy().astype(np.int64)))
    print(f"wrote {ckpt} and {npz}")


if __name__ == "__main__":
    main()
