"""train_torch.py -- the GPT of `shardq train`, written in PyTorch as usually
written, trained on the CPU: the peer that experiments/train-vs-torch.sh times
beside shardq.

The same model (byte-level GPT-2: token and position embeddings, pre-LayerNorm
blocks of causal multi-head attention and a tanh-GELU MLP of width 4C, a final
LayerNorm, the head tied to the token embedding), the same initialisation
scale, AdamW with Megatron's betas and weight decay on matrices and
embeddings, global-norm clipping at 1, and the same global batch per step
(workers x batch sequences of seq bytes, drawn from the same corpus), in one
forward and backward per step as a single-process PyTorch job trains it.
Prints one JSON line: tokens, seconds, tokens_per_s, first and final loss.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.mproj = nn.Linear(4 * c, c)

    def forward(self, x, mask):
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, h, c // h).transpose(1, 2)
        k = k.view(b, t, h, c // h).transpose(1, 2)
        v = v.view(b, t, h, c // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        att = att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, c, heads, context):
        super().__init__()
        self.wte = nn.Embedding(256, c)
        self.wpe = nn.Embedding(context, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(c)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "mproj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif "ln" in name and name.endswith("weight"):
                nn.init.ones_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, 256), targets.reshape(-1))


def corpus_bytes(path):
    """The corpus as shardq walks it: a file, or a directory's files in name
    order, without links and files holding a NUL byte."""
    files = [path]
    if os.path.isdir(path):
        files = []
        for root, dirs, names in os.walk(path):
            dirs.sort()
            files += [os.path.join(root, n) for n in sorted(names)]
    out = bytearray()
    for f in files:
        if os.path.islink(f):
            continue
        data = open(f, "rb").read()
        if b"\0" not in data:
            out += data
    return torch.tensor(list(out), dtype=torch.long) if len(out) < 50_000_000 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=os.environ.get("SHARDQ_CORPUS", "/usr/share/games/fortunes"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--sequences", type=int, default=16, help="sequences per step (workers x batch)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--channels", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = corpus_bytes(a.corpus)
    if data is None or len(data) <= a.seq + 1:
        sys.exit("train_torch.py: %s: no usable text (or more than 50 MB)" % a.corpus)
    model = GPT(a.layers, a.channels, a.heads, a.context)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    warm = max(1, a.steps // 10)
    losses = []
    t0 = time.perf_counter()
    for step in range(a.steps):
        lr = 1e-3 * (step + 1) / warm if step < warm else \
            1e-4 + 0.5 * (1e-3 - 1e-4) * (1 + math.cos(math.pi * (step - warm) / max(1, a.steps - warm)))
        for g in opt.param_groups:
            g["lr"] = lr
        ix = torch.randint(0, len(data) - a.seq - 1, (a.sequences,))
        x = torch.stack([data[i:i + a.seq] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + a.seq] for i in ix])
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    secs = time.perf_counter() - t0
    tokens = a.steps * a.sequences * a.seq
    print(json.dumps({"tokens": tokens, "seconds": secs, "tokens_per_s": tokens / secs,
                      "first_loss": losses[0], "final_loss": losses[-1], "threads": a.threads,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
