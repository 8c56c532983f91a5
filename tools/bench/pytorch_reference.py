#!/usr/bin/env python3
"""PyTorch's side of `graft bench`: the same workloads, shapes and figure names as
tools/bench/graft_workloads.cpp, so tools/gpu_check.sh (--device cuda) and tools/bench/compare.sh
(--device cpu, the Python column) can pair the two by name.

Prints `name value unit (min, max, n)` lines like graft and writes the same JSON with --json.
Every timed region ends with torch.cuda.synchronize(), as graft's does. TF32 is off (exact float32)
except in matmul4096_tf32_tflops, matching graft's default; PyTorch's own default lets cuDNN use
TF32 for convolutions, which would flatter the CNN step.

On the CPU the workloads are graft bench's CPU set: matmul1024 instead of matmul4096, no
alloc_churn, and deep_mlp reports step times only (PyTorch has no CPU allocator statistics).

Usage: python3 tools/bench/pytorch_reference.py [--device cuda|cpu] [--filter REGEX] [--repeat N]
       [--json PATH] [--threads N]
"""
import argparse
import json
import math
import random
import re
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

DEV = torch.device("cuda")


def set_tf32(on):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def time_ms(repeat, warmup, fn):
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def summarize(name, unit, values):
    v = sorted(values)
    return {"name": name, "unit": unit, "value": statistics.median(v), "min": v[0], "max": v[-1], "n": len(v)}


def param(shape, scale):
    return (torch.randn(*shape, device=DEV) * scale).requires_grad_()


class Sgd:
    def __init__(self, params, lr, momentum):
        self.params, self.lr, self.m = params, lr, momentum
        self.bufs = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self):
        for p, b in zip(self.params, self.bufs):
            b.mul_(self.m).add_(p.grad)
            p.sub_(b, alpha=self.lr)
            p.grad = None


class Adam:
    def __init__(self, params, lr):
        self.params, self.lr, self.t = params, lr, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2, eps = 0.9, 0.999, 1e-8
        bc1, bc2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
            p.addcdiv_(m, denom, value=-self.lr / bc1)
            p.grad = None


def bench_engine(repeat):
    x = torch.ones(4, device=DEV, requires_grad=True)

    def step():
        y = x
        for _ in range(2000):
            y = y * 1.0001 + 0.0
        y.sum().backward()

    t = time_ms(repeat, 2, step)
    return [summarize("engine_us_per_op", "us", [v * 1000.0 / 4000.0 for v in t])]


def bench_mlp(repeat):
    torch.manual_seed(0)
    w1, b1, w2, b2 = param((512, 784), 0.035), param((512,), 0.0), param((512, 512), 0.044), param((512,), 0.0)
    w3, b3 = param((10, 512), 0.044), param((10,), 0.0)
    opt = Sgd([w1, b1, w2, b2, w3, b3], 0.01, 0.9)
    x, y = torch.randn(128, 784, device=DEV), torch.randint(0, 10, (128,), device=DEV)

    def step():
        h = F.linear(x, w1, b1).relu()
        h = F.linear(h, w2, b2).relu()
        F.cross_entropy(F.linear(h, w3, b3), y).backward()
        opt.step()

    return [summarize("mlp_step_ms", "ms", time_ms(repeat, 3, step))]


def bench_cnn_layout(repeat, channels_last):
    torch.manual_seed(0)
    c1, cb1, c2, cb2 = param((32, 1, 3, 3), 0.33), param((32,), 0.0), param((64, 32, 3, 3), 0.059), param((64,), 0.0)
    f1, fb1, f2, fb2 = param((128, 3136), 0.018), param((128,), 0.0), param((10, 128), 0.088), param((10,), 0.0)
    opt = Adam([c1, cb1, c2, cb2, f1, fb1, f2, fb2], 1e-3)
    x, y = torch.randn(64, 1, 28, 28, device=DEV), torch.randint(0, 10, (64,), device=DEV)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            c1.set_(c1.clone(memory_format=torch.channels_last))

    def step():
        h = F.max_pool2d(F.conv2d(x, c1, cb1, 1, 1).relu(), 2)
        h = F.max_pool2d(F.conv2d(h, c2, cb2, 1, 1).relu(), 2)
        h = F.linear(h.flatten(1), f1, fb1).relu()
        F.cross_entropy(F.linear(h, f2, fb2), y).backward()
        opt.step()

    name = "cnn_channels_last_step_ms" if channels_last else "cnn_step_ms"
    return [summarize(name, "ms", time_ms(repeat, 2, step))]


def bench_cnn(repeat):
    return bench_cnn_layout(repeat, False) + bench_cnn_layout(repeat, True)


def bench_matmul4096(repeat):
    torch.manual_seed(0)
    a, b = torch.randn(4096, 4096, device=DEV), torch.randn(4096, 4096, device=DEV)
    inner, out = 5, []
    for tf32 in (False, True):
        set_tf32(tf32)

        def step():
            for _ in range(inner):
                a.matmul(b)

        t = time_ms(repeat, 2, step)
        name = "matmul4096_tf32_tflops" if tf32 else "matmul4096_fp32_tflops"
        out.append(summarize(name, "TFLOP/s", [inner * 2.0 * 4096 ** 3 / (ms * 1e9) for ms in t]))
    set_tf32(False)
    return out


def bench_matmul1024(repeat):
    torch.manual_seed(0)
    a, b = torch.randn(1024, 1024, device=DEV), torch.randn(1024, 1024, device=DEV)
    t = time_ms(repeat, 2, lambda: a.matmul(b))
    return [summarize("matmul1024_gflops", "GFLOP/s", [2.0 * 1024 ** 3 / (ms * 1e6) for ms in t])]


def bench_add(repeat):
    a, b = torch.randn(1 << 24, device=DEV), torch.randn(1 << 24, device=DEV)
    inner = 20

    def step():
        for _ in range(inner):
            a + b

    t = time_ms(repeat, 2, step)
    return [summarize("elementwise_add_gbps", "GB/s", [inner * 3.0 * 4 * (1 << 24) / (ms * 1e6) for ms in t])]


def checkpoint_sequential(fns, segments, x):
    n = len(fns)
    seg = max(1, (n + segments - 1) // segments)

    def run_range(lo, hi):
        def f(h):
            for i in range(lo, hi):
                h = fns[i](h)
            return h
        return f

    lo = 0
    while lo + seg < n:
        x = checkpoint(run_range(lo, lo + seg), x, use_reentrant=False)
        lo += seg
    return run_range(lo, n)(x)


# graft's nn::checkpoint_nested: recursive halving, the right spine not checkpointed.
def nested(fns, lo, hi, x):
    if hi - lo <= 1:
        for i in range(lo, hi):
            x = fns[i](x)
        return x
    mid = lo + (hi - lo) // 2
    return checkpoint(lambda h: nested(fns, mid, hi, nested(fns, lo, mid, h)), x, use_reentrant=False)


def spine(fns, lo, hi, x):
    if hi - lo <= 1:
        for i in range(lo, hi):
            x = fns[i](x)
        return x
    mid = lo + (hi - lo) // 2
    return spine(fns, mid, hi, nested(fns, lo, mid, x))


def bench_deep_mlp(repeat):
    torch.manual_seed(0)
    layers, width, batch = 64, 1024, 256
    ws = [param((width, width), 1.0 / math.sqrt(width)) for _ in range(layers)]
    bs = [param((width,), 0.0) for _ in range(layers)]
    fns = [lambda h, w=w, b=b: F.linear(h, w, b).tanh() for w, b in zip(ws, bs)]
    x = torch.randn(batch, width, device=DEV)
    out = []
    for mode, suffix in enumerate(("", "_sqrt", "_nested")):
        held, peak = [], []

        def step():
            on_cuda = DEV.type == "cuda"
            if on_cuda:
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            if mode == 0:
                h = x
                for f in fns:
                    h = f(h)
            elif mode == 1:
                h = checkpoint_sequential(fns, 8, x)
            else:
                h = spine(fns, 0, layers, x)
            loss = h.mean()
            if on_cuda:
                held.append((torch.cuda.memory_allocated() - before) / (1 << 20))
            del h
            loss.backward()
            if on_cuda:
                peak.append((torch.cuda.max_memory_allocated() - before) / (1 << 20))
            with torch.no_grad():  # zero_grad(set_to_none=False), as graft's side
                for p in ws + bs:
                    p.grad.zero_()

        t = time_ms(repeat, 1, step)
        if held:
            out.append(summarize(f"deep_mlp{suffix}_held_mib", "MiB", held[1:]))
            out.append(summarize(f"deep_mlp{suffix}_peak_mib", "MiB", peak[1:]))
        out.append(summarize(f"deep_mlp{suffix}_step_ms", "ms", t))
    return out


def bench_alloc_churn(repeat):
    """100k allocations/frees of 1 B - 4 MiB (log-uniform, at most 64 live): PyTorch's caching
    allocator through torch.cuda.caching_allocator_alloc/delete (Python call overhead included),
    against raw cudaMalloc/cudaFree through CuPy's runtime bindings. The same distribution as
    graft's sequence (not the same draws: graft uses std::mt19937_64)."""
    rng = random.Random(0)
    slots, n = 64, 100000
    live, steps = [False] * slots, []
    for _ in range(n):
        s = rng.randrange(slots)
        steps.append((s, 0 if live[s] else max(1, int(math.exp(rng.uniform(0, math.log(4 << 20)))))))
        live[s] = not live[s]
    alloc, free = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete

    def replay(alloc_fn, free_fn):
        held = [0] * slots
        for s, size in steps:
            if size:
                held[s] = alloc_fn(size)
            else:
                free_fn(held[s])
                held[s] = 0
        for p in held:
            if p:
                free_fn(p)

    t = time_ms(repeat, 1, lambda: replay(alloc, free))
    figs = [summarize("alloc_churn_caching_us_per_op", "us", [v * 1000.0 / n for v in t])]
    try:
        import cupy.cuda.runtime as rt
    except Exception as e:  # noqa: BLE001 - any import failure means no raw baseline
        print(f"alloc_churn: no raw cudaMalloc baseline ({e})", file=sys.stderr)
        return figs
    raw = time_ms(1, 0, lambda: replay(rt.malloc, rt.free))
    figs.append(summarize("alloc_churn_raw_us_per_op", "us", [v * 1000.0 / n for v in raw]))
    figs.append(summarize("alloc_churn_speedup", "x", [figs[1]["value"] / figs[0]["value"]]))
    return figs


def bench_train_epoch(repeat):
    """graft's train_epoch on CUDA: 60000 synthetic images on the host, shuffled batches of 128
    gathered with index_select and copied to the GPU, MLP 784-256-10, Adam 1e-3, cosine schedule."""
    torch.manual_seed(0)
    images, labels = torch.rand(60000, 1, 28, 28), torch.randint(0, 10, (60000,))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n, bs = 60000, 128
    steps = (n + bs - 1) // bs
    state = {"step": 0}

    def epoch():
        perm = torch.randperm(n)
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            x, y = images.index_select(0, idx).to(DEV), labels.index_select(0, idx).to(DEV)
            loss = F.cross_entropy(model((x - 0.2860) * (1.0 / 0.3530)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            state["step"] += 1
            for g in opt.param_groups:
                g["lr"] = 1e-3 * (1 + math.cos(math.pi * state["step"] / (2 * steps))) / 2

    t = time_ms(repeat, 1, epoch)
    return [summarize("train_mlp_epoch_s", "s", [v / 1000.0 for v in t])]


def bench_sdpa(L, causal, repeat):
    """F.scaled_dot_product_attention forward + backward on q, k, v = randn [4, 4, L, 64] (batch 4,
    heads 4, head dim 64), no mask, no dropout; out.backward(g) with a fixed g. Grads are set to
    None between iterations, outside the timed region."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 4, L, 64, device=DEV, requires_grad=True) for _ in range(3))
    g = torch.randn(4, 4, L, 64, device=DEV)

    def iteration():
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(g)

    def clear():
        q.grad = k.grad = v.grad = None

    for _ in range(2):
        iteration()
        clear()
    sync()
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        iteration()
        sync()
        t.append((time.perf_counter() - t0) * 1000.0)
        clear()
    name = f"sdpa_causal_L{L}_ms" if causal else f"sdpa_L{L}_ms"
    return [summarize(name, "ms", t)]


class Vit(torch.nn.Module):
    """graft_workloads.cpp's ViT: patch embedding Conv2d(1, 64, 7, stride 7) -> [N, 16, 64], a
    learned CLS token and positional embedding [17, 64], 6 pre-norm encoder layers (d_model 64,
    4 heads, feed-forward 128, GELU, no dropout), a final LayerNorm and Linear(64, 10) on token 0."""

    def __init__(self):
        super().__init__()
        self.patch = torch.nn.Conv2d(1, 64, 7, stride=7)
        self.cls = torch.nn.Parameter(torch.randn(1, 1, 64) * 0.02)
        self.pos = torch.nn.Parameter(torch.randn(17, 64) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        # norm_first rules out the nested-tensor fast path; saying so silences its warning
        self.encoder = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(64)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        h = self.patch(x).flatten(2).transpose(1, 2)                        # [N, 16, 64]
        h = torch.cat([self.cls.expand(h.shape[0], 1, 64), h], 1) + self.pos  # [N, 17, 64]
        return self.head(self.norm(self.encoder(h))[:, 0])


def bench_vit(repeat):
    """One AdamW step (lr 2e-3, weight decay 0.05) of the ViT on a fixed batch of 128 randn images."""
    torch.manual_seed(0)
    model = Vit().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    x, y = torch.randn(128, 1, 28, 28, device=DEV), torch.randint(0, 10, (128,), device=DEV)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return [summarize("vit_step_ms", "ms", time_ms(repeat, 2, step))]


# (name, function, default repeats, devices)
WORKLOADS = [("engine", bench_engine, 10, "cpu cuda"), ("mlp", bench_mlp, 10, "cpu cuda"),
             ("cnn", bench_cnn, 5, "cpu cuda"), ("matmul1024", bench_matmul1024, 10, "cpu"),
             ("matmul4096", bench_matmul4096, 10, "cuda"), ("elementwise_add", bench_add, 10, "cpu cuda"),
             ("deep_mlp", bench_deep_mlp, 3, "cpu cuda"), ("alloc_churn", bench_alloc_churn, 5, "cuda"),
             ("train_epoch", bench_train_epoch, 3, "cpu cuda"),
             ("sdpa_L16", lambda r: bench_sdpa(16, False, r), 50, "cpu cuda"),
             ("sdpa_L64", lambda r: bench_sdpa(64, False, r), 30, "cpu cuda"),
             ("sdpa_L256", lambda r: bench_sdpa(256, False, r), 10, "cpu cuda"),
             ("sdpa_L1024", lambda r: bench_sdpa(1024, False, r), 5, "cpu cuda"),
             ("sdpa_causal_L1024", lambda r: bench_sdpa(1024, True, r), 5, "cpu cuda"),
             ("vit", bench_vit, 10, "cpu cuda")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filter", default=".*")
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (default: all cores)")
    args = ap.parse_args()
    global DEV
    DEV = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if DEV.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("pytorch_reference: torch sees no CUDA device")
        set_tf32(False)
        where = torch.cuda.get_device_name(0)
    else:
        where = f"cpu, {torch.get_num_threads()} threads"
    print(f"# torch {torch.__version__}, {where}", file=sys.stderr)
    figs = []
    for name, fn, default_repeat, devices in WORKLOADS:
        if DEV.type not in devices.split() or not re.search(args.filter, name):
            continue
        for f in fn(args.repeat or default_repeat):
            print(f"{f['name']} {f['value']:.4g} {f['unit']} (min {f['min']:.4g}, max {f['max']:.4g}, n={f['n']})", flush=True)
            figs.append(f)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({f["name"]: {k: f[k] for k in ("value", "unit", "min", "max", "n")} for f in figs}, out, indent=2)


if __name__ == "__main__":
    main()
