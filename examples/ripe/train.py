"""Train the small RIPE-MambaSpike backbone on synthetic moving-bar events; write its checkpoint and a sample.

Run from anywhere: ``.venv/bin/python examples/ripe/train.py [--epochs N] [--out DIR]``.
Prints, per epoch, the accuracy on the training batches (train mode, as they were seen) and on the
test split (eval mode), and at the end the mean firing rate of every neuron module on the test split.
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

import spikec.nn as snn
from data import split
from model import small


def predict(model, x, batch=100):
    model.eval()
    with torch.no_grad():
        return torch.cat([model(x[:, i:i + batch]).mean(0).argmax(1) for i in range(0, x.shape[1], batch)])


def firing_rates(model, x, batch=100):
    """Mean spike rate of every neuron module over ``x`` (forward hooks; ``return_membrane`` gives a tuple)."""
    totals, hooks = {}, []
    neurons = [(n, m) for n, m in model.named_modules() if isinstance(m, (snn.SiLIF, snn.CSiLIF, snn.LIF))]
    for name, m in neurons:
        def hook(_, __, out, name=name):
            s = out[0] if isinstance(out, tuple) else out
            total, count = totals.get(name, (0.0, 0))
            totals[name] = (total + s.sum().item(), count + s.numel())
        hooks.append(m.register_forward_hook(hook))
    try:
        predict(model, x, batch)
    finally:
        for h in hooks:
            h.remove()
    return {name: total / count for name, (total, count) in totals.items()}


def check_bn_stats(model):
    """Every BN/BNTT must have left its initial running statistics (zero mean, unit variance) in train mode;
    otherwise eval mode would normalize with untrained statistics."""
    for name, m in model.named_modules():
        if isinstance(m, (snn.BNTT, torch.nn.BatchNorm2d)):
            if torch.all(m.running_mean == 0) and torch.all(m.running_var == 1):
                raise RuntimeError(f"{name}: running statistics were not updated in train mode")


def save_atomic(path, write):
    """``write(file)`` into a temp file, then rename: never leaves a half-written file at ``path``."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--out", default=HERE, help="directory for checkpoint.pt and inputs.npz")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--train", type=int, default=1200, help="number of training samples")
    # One intra-op thread: the model is many small ops, and with two threads the OpenMP
    # synchronisation cost more than it saved (measured 5-10x slower per batch on two shared cores).
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x_tr, y_tr, x_te, y_te = split(n_train=args.train)
    model = small()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    batches = (len(y_tr) + args.batch - 1) // args.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=args.epochs * batches)

    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        total, hits = 0.0, 0
        for idx in torch.randperm(len(y_tr)).split(args.batch):
            logits = model(x_tr[:, idx]).mean(0)
            loss = F.cross_entropy(logits, y_tr[idx])
            opt.zero_grad()
            loss.backward()
            # Spiking recurrences can produce rare large surrogate gradients; clipping keeps Adam steady.
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
            hits += (logits.argmax(1) == y_tr[idx]).sum().item()
        if epoch == 0:
            check_bn_stats(model)
        test = (predict(model, x_te) == y_te).float().mean().item()
        print(f"epoch {epoch + 1}/{args.epochs}  loss {total / len(y_tr):.3f}  train {hits / len(y_tr):.4f}  "
              f"test {test:.4f}  ({time.time() - start:.0f}s)", flush=True)

    for name, rate in firing_rates(model, x_te).items():
        print(f"firing rate {name:16s} {rate:.4f}")

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "checkpoint.pt")
    save_atomic(ckpt, lambda f: torch.save(model.state_dict(), f))
    npz = os.path.join(args.out, "inputs.npz")
    sample = x_te[:, :8].numpy().astype(np.float32)  # [T, 8, 2, 32, 32] event counts (mostly 0: compressed)
    save_atomic(npz, lambda f: np.savez_compressed(f, input=sample, label=y_te[:8].numpy().astype(np.int64)))
    print(f"wrote {ckpt} and {npz}  ({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
