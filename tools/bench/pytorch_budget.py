#!/usr/bin/env python3
"""PyTorch's side of `graft bench --filter deep_mlp_budget`: the same deep MLP (64 x (Linear 1024 +
Tanh), batch 256, CPU), trained under 50%, 25% and 12% of plain's activation peak with the only
tool eager PyTorch has for it: checkpoint_sequential with a hand-picked segment count. For each
budget it reports the fastest segment count whose measured peak fits, or that none fits.

The peak: PyTorch's CPU allocator keeps no statistics, so each configuration runs one step under
torch.profiler.profile(profile_memory=True) and takes the largest "Total Allocated" of the trace's
[memory] events (bytes allocated since the profile started, minus bytes freed). As in graft's
workload, the weight gradients exist before the step and backward accumulates into them, so the
peak is activations and temporaries. Step times are medians of untraced steps.

Usage: python3 tools/bench/pytorch_budget.py [--repeat N] [--json PATH]
Prints `name value unit (min, max, n)` lines with graft's figure names; --json writes graft bench's
JSON format. tools/bench/budget_compare.sh runs it alternately with graft bench.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.checkpoint import checkpoint_sequential

LAYERS, WIDTH, BATCH = 64, 1024, 256


def build():
    torch.manual_seed(0)
    mods = []
    for _ in range(LAYERS):
        mods += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()]
    return torch.nn.Sequential(*mods), torch.randn(BATCH, WIDTH)


def step_fn(model, x, segments):
    def step():
        if segments == 0:
            out = model(x)
        else:
            out = checkpoint_sequential(model, segments, x, use_reentrant=False)
        out.mean().backward()
    return step


def peak_mib(step):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tempfile.TemporaryDirectory() as d:
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                step()
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f)["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    return max(totals) / 2**20 if totals else 0.0


def time_ms(step, repeat):
    step()  # warm-up
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        ts.append((time.perf_counter() - t0) * 1e3)
    return ts


def line(name, unit, values):
    med = statistics.median(values)
    print(f"{name} {med:.4g} {unit} (min {min(values):.4g}, max {max(values):.4g}, n={len(values)})", flush=True)
    return name, {"value": med, "unit": unit, "min": min(values), "max": max(values), "n": len(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {torch.backends.mkldnn.is_available() and 'oneDNN' or 'no oneDNN'}", file=sys.stderr)
    model, x = build()
    step_fn(model, x, 0)()  # allocates the .grad tensors, as graft's workload preallocates them
    figures = []
    plain_step = step_fn(model, x, 0)
    plain_peak = peak_mib(plain_step)
    plain_t = time_ms(plain_step, args.repeat)
    figures.append(line("deep_mlp_budget_plain_peak_mib", "MiB", [plain_peak]))
    figures.append(line("deep_mlp_budget_plain_step_ms", "ms", plain_t))
    sweep = {}
    for seg in list(range(2, 17)) + [32]:
        s = step_fn(model, x, seg)
        sweep[seg] = (peak_mib(s), statistics.median(time_ms(s, args.repeat)))
        print(f"# checkpoint_sequential({seg}): peak {sweep[seg][0]:.2f} MiB, step {sweep[seg][1]:.0f} ms", file=sys.stderr)
    figures.append(line("deep_mlp_budget_sequential_lowest_peak_mib", "MiB", [min(p for p, _ in sweep.values())]))
    for pct in (50, 25, 12):
        budget = plain_peak * pct / 100
        figures.append(line(f"deep_mlp_budget_{pct}_budget_mib", "MiB", [budget]))
        fits = [(t, seg, p) for seg, (p, t) in sweep.items() if p <= budget]
        if fits:
            t, seg, p = min(fits)
            figures.append(line(f"deep_mlp_budget_{pct}_best_sequential_ms", "ms", [t]))
            figures.append(line(f"deep_mlp_budget_{pct}_best_sequential_segments", "", [seg]))
            figures.append(line(f"deep_mlp_budget_{pct}_best_sequential_peak_mib", "MiB", [p]))
        else:
            print(f"# {pct}%: no segment count fits {budget:.2f} MiB", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(figures), f, indent=1)  # graft bench's --json format


if __name__ == "__main__":
    main()
