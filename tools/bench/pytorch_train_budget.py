#!/usr/bin/env python3
"""PyTorch's side of `graft bench --filter train_budget`: graft train's CNN and ViT step (batch 128
of randn images, random labels; forward, cross-entropy, backward, Adam / AdamW, gradients set to
none before the forward), plain and under every eager configuration PyTorch offers for memory:
checkpoint_sequential with each segment count, your own saved-tensor pack hooks (bf16, as the
issue's own PyTorch experiments did), and both together. For each it reports the whole step's
peak and its step time; then, for graft's targets (50% of plain's peak for the CNN, 30% for the
ViT), the fastest configuration whose peak fits, or that none does and the lowest peak any reaches.

The peak is the quantity graft's row measures: the step's own allocations at their largest (from
torch.profiler's [memory] events, since PyTorch's CPU allocator keeps no statistics) plus the
optimizer's state, which exists before the step and after it. save_on_cpu is left out: on a CPU
device it moves nothing anywhere.

Usage: python3 tools/bench/pytorch_train_budget.py [--repeat N] [--json PATH]
Prints `name value unit (min, max, n)` lines; --json writes graft bench's JSON format.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

from pytorch_budget import line, peak_mib, time_ms  # the peak from profiler events, medians, output lines

BATCH = 128


class VitEmbed(torch.nn.Module):
    """The ViT's first stage (graft's models::vit): patch embedding, CLS token, positions."""

    def __init__(self):
        super().__init__()
        self.patch = torch.nn.Conv2d(1, 64, 7, stride=7)
        self.cls = torch.nn.Parameter(torch.randn(1, 1, 64) * 0.02)
        self.pos = torch.nn.Parameter(torch.randn(17, 64) * 0.02)

    def forward(self, x):
        h = self.patch(x).flatten(2).transpose(1, 2)                        # [N, 16, 64]
        return torch.cat([self.cls.expand(h.shape[0], 1, 64), h], 1) + self.pos  # [N, 17, 64]


class VitHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, h):
        return self.head(self.norm(h)[:, 0])


def cnn():
    """graft's models::cnn, layer for layer."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, 1, 1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, 1, 1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(3136, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def vit():
    """graft's models::vit as its stages: embedding, 6 pre-norm encoder layers, head."""
    layers = [torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True) for _ in range(6)]
    return torch.nn.Sequential(VitEmbed(), *layers, VitHead())


def bf16_hooks():
    """Saved activations packed to bf16: what the issue's PyTorch experiments used."""
    def pack(t):
        if t.dtype == torch.float32 and not (t.requires_grad and t.is_leaf):
            return ("bf16", t.to(torch.bfloat16))
        return ("kept", t)

    def unpack(p):
        return p[1].float() if p[0] == "bf16" else p[1]
    return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def make_step(model, opt, x, y, segments, bf16):
    def step():
        # Gradients set to none at the end, so that every step (the profiled one too) starts without
        # them, as graft's does (its zero_grad runs before the forward).
        ctx = bf16_hooks() if bf16 else torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
        with ctx:
            if segments == 0:
                out = model(x)
            else:
                out = checkpoint_sequential(model, segments, x, use_reentrant=False)
            loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def state_mib(opt):
    n = 0
    for s in opt.state.values():
        n += sum(v.numel() * v.element_size() for v in s.values() if torch.is_tensor(v) and v.dim() > 0)
    return n / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)
    figures = []
    for name, build, pct in (("cnn", cnn, 50), ("vit", vit, 30)):
        torch.manual_seed(0)
        model = build()
        if name == "cnn":  # channels-last, as graft train runs its CNN on the CPU
            model = model.to(memory_format=torch.channels_last)
        if name == "vit":
            opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
        else:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x, y = torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))
        if name == "cnn":
            x = x.contiguous(memory_format=torch.channels_last)
        for _ in range(3):  # the optimizer's state, and oneDNN's primitives made before any timing
            make_step(model, opt, x, y, 0, False)()
        held = state_mib(opt)
        configs = {}
        for seg in [0] + list(range(2, len(model) + 1)):
            for bf16 in (False, True):
                s = make_step(model, opt, x, y, seg, bf16)
                configs[(seg, bf16)] = (peak_mib(s) + held, statistics.median(time_ms(s, args.repeat)))
                print(f"# {name}: checkpoint_sequential({seg}){' + bf16 hooks' if bf16 else ''}: "
                      f"peak {configs[(seg, bf16)][0]:.2f} MiB, step {configs[(seg, bf16)][1]:.1f} ms", file=sys.stderr)
        plain_peak, plain_ms = configs[(0, False)]
        n = f"{name}_budget"
        figures.append(line(f"{n}_plain_peak_mib", "MiB", [plain_peak]))
        figures.append(line(f"{n}_plain_step_ms", "ms", [plain_ms]))
        lowest = min(configs.items(), key=lambda kv: (kv[1][0], kv[1][1]))
        figures.append(line(f"{n}_lowest_peak_mib", "MiB", [lowest[1][0]]))
        figures.append(line(f"{n}_lowest_peak_step_ms", "ms", [lowest[1][1]]))
        print(f"# {name}: lowest peak with checkpoint_sequential({lowest[0][0]})"
              f"{' + bf16 hooks' if lowest[0][1] else ''}", file=sys.stderr)
        budget = plain_peak * pct / 100
        figures.append(line(f"{n}_{pct}_budget_mib", "MiB", [budget]))
        fits = [(t, key, p) for key, (p, t) in configs.items() if p <= budget]
        if fits:
            t, key, p = min(fits)
            figures.append(line(f"{n}_{pct}_best_peak_mib", "MiB", [p]))
            figures.append(line(f"{n}_{pct}_best_step_ms", "ms", [t]))
            figures.append(line(f"{n}_{pct}_best_vs_plain", "x", [t / plain_ms]))
            print(f"# {name} {pct}%: fastest fit checkpoint_sequential({key[0]}){' + bf16 hooks' if key[1] else ''}",
                  file=sys.stderr)
        else:
            print(f"# {name} {pct}%: no eager configuration fits {budget:.2f} MiB", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(figures), f, indent=1)  # graft bench's --json format


if __name__ == "__main__":
    main()
