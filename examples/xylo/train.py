"""Train the keyword-spotting network briefly with snnTorch's own surrogate gradient; write ``checkpoint.pt``
and ``inputs.npz`` (keywords from another seed). Run from the repository root:

    .venv/bin/python examples/xylo/train.py
"""
import sys
from pathlib import Path

import numpy as np
import snntorch.utils
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import keywords, kws  # noqa: E402


def run(net, x):
    """snnTorch's own loop over time (init_hidden modules keep their state between calls)."""
    snntorch.utils.reset(net)
    return torch.stack([net(x[t]) for t in range(x.shape[0])])


def main(epochs: int = 40) -> None:
    torch.manual_seed(0)
    net = kws()
    x, y = keywords(256, seed=1)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    for epoch in range(epochs):
        for b in range(0, x.shape[1], 64):
            out = run(net, x[:, b:b + 64])
            loss = torch.nn.functional.cross_entropy(out.sum(0), y[b:b + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    xt, yt = keywords(16, seed=2)
    with torch.no_grad():
        out = run(net, torch.from_numpy(xt))
        hidden = []
        hook = net[1].register_forward_hook(lambda m, i, o: hidden.append(o))
        run(net, torch.from_numpy(xt))
        hook.remove()
    acc = float((out.sum(0).argmax(1).numpy() == yt).mean())
    print(f"loss {loss.item():.3f}, held-out accuracy {acc:.2f}, output spikes {int(out.sum())}, "
          f"hidden spikes {int(torch.stack(hidden).sum())}")
    torch.save(net.state_dict(), HERE / "checkpoint.pt")
    np.savez(HERE / "inputs.npz", input=xt, label=yt)


if __name__ == "__main__":
    main()
