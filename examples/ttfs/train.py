"""Train the TTFS example ANNs on scikit-learn digits and write their checkpoints (``<name>.pt`` here).

Run from anywhere: ``.venv/bin/python examples/ttfs/train.py [--model mlp|cnn|mlp_ln|all] [--epochs N]``.
Each model trains in well under a minute on a CPU (ordinary ANN training: cross-entropy, Adam, T=1).
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # repo root, for `spikec` without an install
sys.path.insert(0, HERE)

import torch
import torch.nn.functional as F

from digits_data import load_split
from cnn import cnn
from mlp import mlp
from mlp_ln import mlp_ln
from transformer import tokens, transformer

FACTORIES = {"mlp": mlp, "cnn": cnn, "mlp_ln": mlp_ln, "transformer": transformer}

EPOCHS = {"mlp": 60, "cnn": 100, "mlp_ln": 60, "transformer": 60}
LR = {"mlp": 3e-3, "cnn": 1e-2, "mlp_ln": 3e-3, "transformer": 3e-3}


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        return (model(x[None])[0].argmax(1) == y).float().mean().item()


def train(name, epochs=None, lr=None, batch=64, out=HERE):
    torch.set_num_threads(1)  # tiny ops: more threads only add OpenMP synchronisation
    torch.manual_seed(0)
    lr = lr or LR[name]
    model = FACTORIES[name](pretrained=False)
    x_tr, y_tr, x_te, y_te = load_split(flat=len(model.input_shape) != 3)
    if name == "transformer":
        x_tr, x_te = tokens(x_tr), tokens(x_te)
    x_tr, x_te = torch.tensor(x_tr, dtype=torch.float32), torch.tensor(x_te, dtype=torch.float32)
    y_tr, y_te = torch.tensor(y_tr), torch.tensor(y_te)
    epochs = epochs or EPOCHS[name]
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    start = time.time()
    for epoch in range(epochs):
        model.train()
        for idx in torch.randperm(len(y_tr)).split(batch):
            loss = F.cross_entropy(model(x_tr[idx][None])[0], y_tr[idx])  # [T=1, B, ...]
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
    acc_tr, acc_te = accuracy(model, x_tr, y_tr), accuracy(model, x_te, y_te)
    path = os.path.join(out, f"{name}.pt")
    tmp = path + ".tmp"
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
    print(f"{name}: {epochs} epochs in {time.time() - start:.1f}s, train {acc_tr:.4f}, test {acc_te:.4f} -> {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="all", choices=["all", *FACTORIES])
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    for name in (FACTORIES if args.model == "all" else [args.model]):
        train(name, args.epochs, out=args.out)


if __name__ == "__main__":
    main()
