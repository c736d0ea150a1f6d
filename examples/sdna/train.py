"""Train the SDNA backbone (Linear form) on static digits and on synthetic events; write checkpoints and samples.

Run from anywhere: ``.venv/bin/python examples/sdna/train.py [--which static|event|both] [--epochs N] [--out DIR]``.
Writes ``static.pt`` / ``event.pt`` (state_dicts, loadable into both the Linear and the Pairwise factories)
and ``inputs_static.npz`` / ``inputs_event.npz`` (keys ``input`` [T, B, ...] float32 and ``label`` int64).
Training uses the Linear form (cheaper); at the end the test accuracy of *both* forms is printed with the
same weights. Pairwise is a different function (its gate neurons see ``Q_i K_j``, not the window mean of
``K V``, and the gate BN statistics were gathered on the latter), so its accuracy is expected to be lower.
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
from data import event_split, static_split
from model import event_linear, event_pairwise, static_linear, static_pairwise

CONFIGS = {
    # name: (train factory, eval factories, data, checkpoint, sample file, default epochs, lr)
    "static": (static_linear, {"linear": static_linear, "pairwise": static_pairwise}, static_split,
               "static.pt", "inputs_static.npz", 20, 3e-3),
    "event": (event_linear, {"linear": event_linear, "pairwise": event_pairwise}, event_split,
              "event.pt", "inputs_event.npz", 8, 3e-3),
}


def predict(model, x, batch=200):
    model.eval()
    with torch.no_grad():
        return torch.cat([model(x[:, i:i + batch]).mean(0).argmax(1) for i in range(0, x.shape[1], batch)])


def firing_rates(model, x, batch=200):
    """Mean spike count per element of every IntFire module over ``x`` (values 0..4)."""
    totals, hooks = {}, []
    for name, m in model.named_modules():
        if isinstance(m, snn.IntFire):
            def hook(_, __, out, name=name):
                total, count = totals.get(name, (0.0, 0))
                totals[name] = (total + out.sum().item(), count + out.numel())
            hooks.append(m.register_forward_hook(hook))
    try:
        predict(model, x, batch)
    finally:
        for h in hooks:
            h.remove()
    return {name: total / count for name, (total, count) in totals.items()}


def check_bn_stats(model):
    """Every BN must have left its initial running statistics in train mode."""
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.BatchNorm2d) and torch.all(m.running_mean == 0) and torch.all(m.running_var == 1):
            raise RuntimeError(f"{name}: running statistics were not updated in train mode")


def save_atomic(path, write):
    """``write(file)`` into a temp file, then rename: never leaves a half-written file at ``path``."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


def train(which, args):
    make, variants, split, ckpt_name, sample_name, default_epochs, lr = CONFIGS[which]
    epochs = args.epochs or default_epochs
    torch.manual_seed(0)
    x_tr, y_tr, x_te, y_te = split()
    model = make()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    batches = (len(y_tr) + args.batch - 1) // args.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=epochs * batches)
    print(f"[{which}] train {tuple(x_tr.shape)}  test {tuple(x_te.shape)}  "
          f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)
    start = time.time()
    for epoch in range(epochs):
        model.train()
        total, hits = 0.0, 0
        for idx in torch.randperm(len(y_tr)).split(args.batch):
            logits = model(x_tr[:, idx]).mean(0)
            loss = F.cross_entropy(logits, y_tr[idx])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
            hits += (logits.argmax(1) == y_tr[idx]).sum().item()
        if epoch == 0:
            check_bn_stats(model)
        test = (predict(model, x_te) == y_te).float().mean().item()
        print(f"[{which}] epoch {epoch + 1}/{epochs}  loss {total / len(y_tr):.3f}  train {hits / len(y_tr):.4f}  "
              f"test {test:.4f}  ({time.time() - start:.0f}s)", flush=True)
    train_time = time.time() - start

    for name, rate in firing_rates(model, x_te).items():
        print(f"[{which}] mean spike count {name:24s} {rate:.4f}")
    state = model.state_dict()
    preds, logits = {}, {}
    for form, factory in variants.items():
        m = factory()
        m.load_state_dict(state)
        preds[form] = predict(m, x_te)
        with torch.no_grad():
            logits[form] = m.eval()(x_te[:, :100]).mean(0)
        acc = (preds[form] == y_te).float().mean().item()
        print(f"[{which}] test accuracy, {form:8s} SDNA with the Linear-trained weights: {acc:.4f}", flush=True)
    agree = (preds["linear"] == preds["pairwise"]).float().mean().item()
    diff = (logits["linear"] - logits["pairwise"]).abs().max().item()
    print(f"[{which}] Linear vs Pairwise: same prediction on {agree:.4f} of the test set; "
          f"max |logit difference| on 100 test samples {diff:.4f} (different functions)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, ckpt_name)
    save_atomic(ckpt, lambda f: torch.save(state, f))
    npz = os.path.join(args.out, sample_name)
    sample = x_te[:, :8].numpy().astype(np.float32)
    save_atomic(npz, lambda f: np.savez_compressed(f, input=sample, label=y_te[:8].numpy().astype(np.int64)))
    print(f"[{which}] wrote {ckpt} and {npz}  (training {train_time:.0f}s)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--which", choices=("static", "event", "both"), default="both")
    ap.add_argument("--epochs", type=int, default=None, help="default: 20 (static), 8 (event)")
    ap.add_argument("--out", default=HERE, help="directory for the checkpoints and input samples")
    ap.add_argument("--batch", type=int, default=32)
    # One intra-op thread: the model is many small ops; OpenMP synchronisation costs more than it saves.
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for which in (("static", "event") if args.which == "both" else (args.which,)):
        train(which, args)


if __name__ == "__main__":
    main()
