"""Build the Loihi-exact digits network from the float demo's checkpoint, fine-tune it, write its checkpoint.

Run from anywhere: ``.venv/bin/python examples/digits_loihi/train.py [--from-float CKPT] [--epochs N] [--out DIR]
[--lif1-reset subtract|zero]``. ``--lif1-reset zero`` is the chip-ready recipe (``model.small_chip``): the float
demo's subtract-reset weights quantized into a zero-reset lif1 (Lava's LIF), then fine-tuned with the same
integer forward, written as ``checkpoint_chip.pt``. Each run prints the float demo's test accuracy, the quantized
model's before fine-tuning and the fine-tuned one's, and the CPU seconds of fine-tuning (README.md: measured).

The recipe (``quantize_float``): every BatchNorm folded into its conv (weights x gamma/sigma per channel, the
shift into the LIF bias), the average pool folded into conv2 (3x3 -> 4x4 stride 2), then per layer one scale
``lam`` (integer units per float unit) with ``vth = floor(254 / max|w|)`` and ``lam = vth / threshold``, so the
largest weight is a mixed-sign 8-bit mantissa and the float threshold 1.0 is ``vth << 6``; the LIF's
``beta = 0.9`` is ``dv = round(4096 (1 - beta))``, no current memory (``du = 4095``); biases in ``v`` units
``bias * lam * 64`` as ``bias_mant << bias_exp`` with the smallest exponent keeping 13 bits. Fine-tuning then
trains the integer forward itself (straight-through weights, surrogate spikes), the loss on the read-out
divided by ``readout_scale``.
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

from model import DigitsLoihi, encode, load_split

FLOAT_DIR = os.path.join(os.path.dirname(HERE), "digits")
FLOAT_CKPT = os.path.join(FLOAT_DIR, "checkpoint.pt")
CHECKPOINTS = {"subtract": "checkpoint.pt", "zero": "checkpoint_chip.pt"}


def accuracy(model, spikes, labels, batch=256):
    model.eval()
    with torch.no_grad():
        hits = sum((model(spikes[:, i:i + batch]).mean(0).argmax(1) == labels[i:i + batch]).sum().item()
                   for i in range(0, len(labels), batch))
    return hits / len(labels)


def float_accuracy(spikes, labels, ckpt=FLOAT_CKPT):
    """The float demo (examples/digits, its checkpoint) on the same test spikes: the baseline of the recipes."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("digits_float_model", os.path.join(FLOAT_DIR, "model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.small()
    model.load_state_dict(torch.load(ckpt))
    return accuracy(model, spikes, labels)


def _bn_fold(sd, conv, bn, eps=1e-5):
    s = sd[f"{bn}.weight"] / torch.sqrt(sd[f"{bn}.running_var"] + eps)
    w = sd[f"{conv}.weight"] * s.view(-1, 1, 1, 1)
    return w, sd[f"{bn}.bias"] - sd[f"{bn}.running_mean"] * s


def _pool_fold(w3):
    """conv 3x3 (padding 1) then AvgPool2d(2) == conv 4x4, stride 2, padding 1 with this kernel."""
    o, i = w3.shape[:2]
    w4 = torch.zeros(o, i, 4, 4, dtype=w3.dtype)
    for di in (0, 1):
        for dj in (0, 1):
            w4[:, :, di:di + 3, dj:dj + 3] += w3 / 4
    return w4


def _neuron(lif, w, bias, threshold, beta):
    """Scale ``w`` into mantissas, set the LIF's vth, dv and bias; the mantissas (float, rounded by the module)."""
    vth = int(np.floor(254 / float(w.abs().max())))
    lam = vth / threshold
    b = bias * lam * 64
    exp = 0
    while float(b.abs().max()) / 2 ** exp > 4095 and exp < 7:
        exp += 1
    lif.vth.fill_(vth)
    lif.dv.fill_(round(4096 * (1 - beta)))
    lif.bias_exp.fill_(exp)
    lif.bias_mant.copy_(b / 2 ** exp)
    return w * lam


def quantize_float(float_state: dict, lif1_reset: str = "subtract"):
    """The Loihi-exact model holding the float demo's weights, quantized (see the module doc); ``lif1_reset``
    "zero" puts them into the chip-ready neuron (the float demo's lif1 resets by subtraction)."""
    model = DigitsLoihi(lif1_reset=lif1_reset)
    sd = {k: v.double() for k, v in float_state.items()}
    with torch.no_grad():
        w1, b1 = _bn_fold(sd, "conv1.0", "conv1.1")
        model.conv1.weight.copy_(_neuron(model.lif1, w1, b1, float(sd["lif1.threshold"]), float(sd["lif1.beta"])))
        w2, b2 = _bn_fold(sd, "conv2.0", "conv2.1")
        model.conv2.weight.copy_(_neuron(model.lif2, _pool_fold(w2), b2, float(sd["lif2.threshold"]),
                                         float(sd["lif2.beta"])))
        wh, bh = sd["head.1.weight"], sd["head.1.bias"]
        lam = 254 / float(wh.abs().max())
        model.head.weight.copy_(wh * lam)
        model.head.bias.copy_(bh * lam)
        model.readout_scale.fill_(lam)
    return model


def snap(model):
    """Store the integers the forward uses (the latent floats rounded): a checkpoint that says what deploys."""
    with torch.no_grad():
        for m in (model.conv1, model.conv2, model.head):
            m.weight.copy_(m.integer_weights() / 2 ** getattr(m, "weight_exp", 0) if m is not model.head
                           else m.integer_weights())
        model.head.bias.copy_(model.head.integer_bias())
        for lif in (model.lif1, model.lif2):
            lif.bias_mant.copy_(lif.integer_bias_mant())
    return model


def finetune(model, x_tr, y_tr, test, epochs, lr, batch):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    start, cpu = time.time(), time.process_time()
    for epoch in range(epochs):
        spikes = encode(x_tr, model.steps, seed=2000 + epoch)
        model.train()
        total = 0.0
        for idx in torch.randperm(len(y_tr)).split(batch):
            loss = F.cross_entropy(model(spikes[:, idx]).mean(0) / model.readout_scale, y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        print(f"epoch {epoch + 1:2d}/{epochs}  loss {total / len(y_tr):.3f}  test {accuracy(model, *test):.4f}  "
              f"({time.time() - start:.0f}s wall, {time.process_time() - cpu:.0f}s CPU)", flush=True)
    print(f"fine-tuning CPU seconds: {time.process_time() - cpu:.1f}", flush=True)
    return model


def save_atomic(path, write):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--from-float", default=FLOAT_CKPT, help="the float demo's checkpoint")
    ap.add_argument("--epochs", type=int, default=4, help="fine-tuning epochs (0: the quantized float model)")
    ap.add_argument("--lr", type=float, default=0.1, help="Adam step, in mantissa units")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", default=HERE, help="directory for the checkpoint and inputs.npz")
    ap.add_argument("--lif1-reset", choices=sorted(CHECKPOINTS), default="subtract",
                    help="lif1's reset: subtract (the float demo's; SpikecLIF) or zero (chip-ready: Lava's LIF)")
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.manual_seed(0)
    x_tr, y_tr, x_te, y_te = load_split()
    test = (encode(x_te, 8, seed=0), y_te)
    print(f"float demo (examples/digits): test {float_accuracy(*test, ckpt=args.from_float):.4f}", flush=True)
    model = quantize_float(torch.load(args.from_float), args.lif1_reset)
    print(f"quantized float checkpoint, lif1 reset {args.lif1_reset}: test {accuracy(model, *test):.4f}", flush=True)
    snap(finetune(model, x_tr, y_tr, test, args.epochs, args.lr, args.batch))
    print(f"fine-tuned Loihi-exact model: test {accuracy(model, *test):.4f}")

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, CHECKPOINTS[args.lif1_reset])
    save_atomic(ckpt, lambda f: torch.save(model.state_dict(), f))
    npz = os.path.join(args.out, "inputs.npz")
    sample = encode(x_te[:16], model.steps, seed=0).numpy().astype(np.float32)
    save_atomic(npz, lambda f: np.savez(f, input=sample, label=y_te[:16].numpy().astype(np.int64)))
    print(f"wrote {ckpt} and {npz}")


if __name__ == "__main__":
    main()
