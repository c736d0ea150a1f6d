"""Train the digits demo SNN and write its checkpoint and a small spike-input sample.

Run from anywhere: ``.venv/bin/python examples/digits/train.py [--epochs N] [--out DIR]``.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # repo root, for `spikec` without an install
sys.path.insert(0, HERE)

import numpy as np
import torch
import torch.nn.functional as F

from model import encode, load_split, small


def accuracy(model, spikes, labels, batch=256):
    model.eval()
    with torch.no_grad():
        hits = sum((model(spikes[:, i:i + batch]).mean(0).argmax(1) == labels[i:i + batch]).sum().item()
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
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--out", default=HERE, help="directory for checkpoint.pt and inputs.npz")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.manual_seed(0)
    x_tr, y_tr, x_te, y_te = load_split()
    model = small()
    steps = model.steps
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)
    test_spikes = encode(x_te, steps, seed=0)

    start = time.time()
    for epoch in range(args.epochs):
        # Fresh spike trains every epoch (seeded): the rate-coding noise acts as augmentation.
        train_spikes = encode(x_tr, steps, seed=1000 + epoch)
        model.train()
        total = 0.0
        for idx in torch.randperm(len(y_tr)).split(args.batch):
            loss = F.cross_entropy(model(train_spikes[:, idx]).mean(0), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        print(f"epoch {epoch + 1:2d}/{args.epochs}  loss {total / len(y_tr):.3f}  "
              f"train {accuracy(model, train_spikes, y_tr):.4f}  test {accuracy(model, test_spikes, y_te):.4f}  "
              f"({time.time() - start:.0f}s)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "checkpoint.pt")
    save_atomic(ckpt, lambda f: torch.save(model.state_dict(), f))
    npz = os.path.join(args.out, "inputs.npz")
    sample = encode(x_te[:16], steps, seed=0).numpy().astype(np.float32)  # [T, 16, 1, 8, 8]
    save_atomic(npz, lambda f: np.savez(f, input=sample, label=y_te[:16].numpy().astype(np.int64)))
    print(f"wrote {ckpt} and {npz}")


if __name__ == "__main__":
    main()
