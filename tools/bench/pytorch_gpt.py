#!/usr/bin/env python3
"""PyTorch's side of graft's char-level GPT (nn::GPT, nn/gpt.h): the same model, corpus and recipe,
so a run's validation loss, its step time and its sampling rate can be set beside graft's.

The model (GPT-2's block, nanoGPT's layout; parameter names are graft's, so a state dict moves
between the two by name): vocab V, block_size T = 64, n_layer 4, n_head 4, n_embd C = 128, biases on.
  wte.weight [V, C], wpe.weight [T, C]
  h.{i}.ln_1, h.{i}.attn.c_attn [3C, C] (output rows q, k, v), h.{i}.attn.c_proj [C, C],
  h.{i}.ln_2, h.{i}.mlp.c_fc [4C, C], h.{i}.mlp.c_proj [C, 4C], ln_f
  logits = ln_f(x) @ wte.weight^T (the head is tied: no parameter of its own)
forward(idx [B, t]): x = drop(wte(idx) + wpe(0..t-1)); per block, pre-norm,
  x += drop(c_proj(sdpa(q, k, v, is_causal))), x += drop(mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))),
  with q, k, v = c_attn(ln_1(x)) split in that order, each [B, t, H, C/H] -> [B, H, t, C/H].
  LayerNorm eps 1e-5, exact (erf) GELU.
Init (GPT-2 / nanoGPT): Linear and Embedding weights N(0, 0.02), attn.c_proj and mlp.c_proj weights
N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weight 1 and bias 0; torch.manual_seed(seed) first.

The corpus: every regular file (no symlinks, no *.dat) of /usr/share/games/fortunes in byte order of
name, concatenated as bytes, only bytes 32..126 and '\\n' kept; vocabulary = the sorted distinct
characters, token id = rank. The first N*9//10 characters train, the rest validate. With --data FILE:
any UTF-8 text, vocabulary = its distinct code points sorted, nothing filtered.

The recipe (iterations, not epochs): each iteration draws 12 start positions uniformly from
[0, len(train) - 65] (x = train[s:s+64], y = train[s+1:s+65]) from the global generator; loss = mean
cross-entropy over the 12 x 64 tokens; AdamW(model.parameters(), lr 1e-3, betas (0.9, 0.99), eps 1e-8,
weight decay 0.1 on every parameter); lr of iteration i (0-based) = 1e-3 (i+1)/100 for i < 100, then
1e-4 + (1e-3 - 1e-4)(1 + cos(pi (i+1-100) / (iters-100))) / 2, so the last runs at 1e-4;
clip_grad_norm_(1.0) before each step. Validation: mean cross-entropy over 200 random windows of the
validation split (all 200 x 64 tokens) under no_grad and eval(), every --eval-every iterations and at
the end; the windows come from a generator of its own, seeded with the seed afresh at every
evaluation, so every evaluation sees the same 200 windows and training randomness is untouched.

Bench modes (the model freshly initialised, or --load):
  --bench step      median ms of one training iteration (forward, backward, clip, AdamW step; the
                    batches drawn beforehand) over --repeat timed iterations (30) after 5 warmup:
                    `gpt_step_ms`
  --bench generate  tokens/s of nanoGPT's sampling loop, eager and without a KV cache: 200 new
                    tokens from a one-token context (id 0), each step crops the context to the last
                    64 tokens, runs forward, takes the last position's logits / temperature 1.0, no
                    top-k, softmax and torch.multinomial, under torch.inference_mode():
                    `gpt_generate_tokens_per_s`, median over --repeat runs (5) after one warmup
Bench lines read `name value unit (min, max, n)` like tools/bench/pytorch_reference.py.
--precision bf16 runs every forward (training, evaluation, sampling) under CPU autocast to bfloat16;
the parameters, the optimizer and the cross-entropy stay float32.

Usage: python3 tools/bench/pytorch_gpt.py [--seed S] [--iters 2000] [--eval-every 500] [--data FILE]
       [--threads N] [--dropout X] [--precision fp32|bf16] [--out PATH.safetensors] [--load PATH]
       [--eval-whole] [--bench step|generate] [--repeat N] [--json PATH]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

FORTUNES = "/usr/share/games/fortunes"
BATCH, BLOCK = 12, 64
LR, MIN_LR, WARMUP = 1e-3, 1e-4, 100
EVAL_WINDOWS = 200


# ---------------------------------------------------------------- model
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head, self.n_embd, self.dropout = n_head, n_embd, dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x):
        B, t, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, t, self.n_head, C // self.n_head).transpose(1, 2)  # [B, H, t, C/H]
        k = k.view(B, t, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, t, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, t, C)
        return self.resid_drop(self.c_proj(y))


class Mlp(nn.Module):
    def __init__(self, n_embd, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5, bias=bias)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5, bias=bias)
        self.mlp = Mlp(n_embd, dropout, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=True):
        super().__init__()
        self.config = dict(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head,
                           n_embd=n_embd, dropout=dropout, bias=bias)
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(n_embd, n_head, dropout, bias) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5, bias=bias)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        n_layer = len(self.h)
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj") else 0.02
                nn.init.normal_(m.weight, 0.0, std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, 0.02)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx):
        B, t = idx.shape
        assert t <= self.block_size, f"sequence of {t} > block_size {self.block_size}"
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


# ---------------------------------------------------------------- data
def load_corpus(data_file=None):
    """-> (token ids int64 [N], vocabulary as a list of characters, description)."""
    if data_file:
        with open(data_file, encoding="utf-8") as f:
            text = f.read()
        where = data_file
    else:
        if not os.path.isdir(FORTUNES):
            sys.exit(f"pytorch_gpt: no {FORTUNES} (apt-get install -y fortunes fortunes-min) and no --data")
        names = sorted(os.listdir(FORTUNES), key=os.fsencode)
        raw = bytearray()
        files = 0
        for n in names:
            p = os.path.join(FORTUNES, n)
            if n.endswith(".dat") or os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                raw += f.read()
            files += 1
        keep = bytes(b for b in raw if 32 <= b <= 126 or b == 10)
        text = keep.decode("ascii")
        where = f"{FORTUNES} ({files} files, {len(raw)} bytes, {len(keep)} kept)"
    vocab = sorted(set(text))
    rank = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([rank[c] for c in text], dtype=torch.long)
    return ids, vocab, where


def get_batch(data, batch, block, generator=None):
    s = torch.randint(0, len(data) - block, (batch,), generator=generator)  # in [0, len - block - 1]
    x = torch.stack([data[i:i + block] for i in s.tolist()])
    y = torch.stack([data[i + 1:i + 1 + block] for i in s.tolist()])
    return x, y


def lr_at(i, iters):
    if i < WARMUP:
        return LR * (i + 1) / WARMUP
    frac = (i + 1 - WARMUP) / max(1, iters - WARMUP)
    return MIN_LR + (LR - MIN_LR) * (1 + math.cos(math.pi * frac)) / 2


def autocast(precision):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")


@torch.no_grad()
def evaluate(model, val, seed, precision):
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    x, y = get_batch(val, EVAL_WINDOWS, BLOCK, g)
    total = 0.0
    for lo in range(0, EVAL_WINDOWS, 50):  # 4 chunks of 50 windows: the mean over all 200 x 64 tokens
        with autocast(precision):
            logits = model(x[lo:lo + 50])
        total += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y[lo:lo + 50].reshape(-1),
                                 reduction="sum").item()
    model.train(was_training)
    return total / (EVAL_WINDOWS * BLOCK)


@torch.no_grad()
def evaluate_whole_split(model, val, precision):
    """Mean cross-entropy over every whole window of the split side by side (starts 0, 64, 128, ...,
    each with its next character): deterministic, as `graft eval --model gpt`."""
    was_training = model.training
    model.eval()
    starts = list(range(0, len(val) - BLOCK, BLOCK))
    total, tokens = 0.0, 0
    for lo in range(0, len(starts), 50):
        s = starts[lo:lo + 50]
        x = torch.stack([val[i:i + BLOCK] for i in s])
        y = torch.stack([val[i + 1:i + 1 + BLOCK] for i in s])
        with autocast(precision):
            logits = model(x)
        total += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
        tokens += y.numel()
    model.train(was_training)
    return total / tokens, len(starts), tokens


def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)


def train_step(model, opt, x, y, lr, precision):
    for g in opt.param_groups:
        g["lr"] = lr
    with autocast(precision):
        logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


# ---------------------------------------------------------------- benches
def summarize(name, unit, values):
    v = sorted(values)
    return {"name": name, "unit": unit, "value": statistics.median(v), "min": v[0], "max": v[-1], "n": len(v)}


def bench_step(model, train, repeat, precision):
    opt = make_optimizer(model)
    model.train()
    warmup = 5
    batches = [get_batch(train, BATCH, BLOCK) for _ in range(warmup + repeat)]
    times = []
    for i, (x, y) in enumerate(batches):
        t0 = time.perf_counter()
        train_step(model, opt, x, y, LR, precision)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000.0)
    return summarize("gpt_step_ms", "ms", times)


@torch.inference_mode()
def sample(model, idx, new_tokens, temperature=1.0, top_k=None, precision="fp32"):
    for _ in range(new_tokens):
        cond = idx if idx.size(1) <= model.block_size else idx[:, -model.block_size:]
        with autocast(precision):
            logits = model(cond)
        logits = logits[:, -1, :].float() / temperature
        if top_k:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float("inf")
        probs = F.softmax(logits, dim=-1)
        idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
    return idx


def bench_generate(model, repeat, precision, new_tokens=200):
    model.eval()
    start = torch.zeros((1, 1), dtype=torch.long)
    sample(model, start, 20, precision=precision)  # warmup
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = sample(model, start, new_tokens, precision=precision)
        rates.append(new_tokens / (time.perf_counter() - t0))
    assert out.shape == (1, 1 + new_tokens)
    return summarize("gpt_generate_tokens_per_s", "tokens/s", rates), out


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--data", help="a UTF-8 text file instead of the fortunes corpus")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (default: all cores)")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: CPU autocast")
    ap.add_argument("--out", help="save the final state dict here (safetensors)")
    ap.add_argument("--load", help="start from this state dict (safetensors) instead of the init")
    ap.add_argument("--eval-whole", action="store_true",
                    help="print the loss over every whole window of the validation split (of --load, or after "
                         "training) and stop there")
    ap.add_argument("--bench", choices=("step", "generate"))
    ap.add_argument("--repeat", type=int, default=0, help="timed repeats of a bench (step 30, generate 5)")
    ap.add_argument("--json", help="write the bench figure here")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    ids, vocab, where = load_corpus(args.data)
    n_train = len(ids) * 9 // 10
    train, val = ids[:n_train], ids[n_train:]
    torch.manual_seed(args.seed)
    model = GPT(len(vocab), BLOCK, dropout=args.dropout)
    if args.load:
        from safetensors.torch import load_file
        model.load_state_dict(load_file(args.load))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"# torch {torch.__version__}, cpu, {torch.get_num_threads()} threads, {args.precision}; corpus {where}: "
          f"{len(ids)} chars, vocab {len(vocab)}, train {len(train)}, val {len(val)}; {n_params} parameters; "
          f"seed {args.seed}", file=sys.stderr, flush=True)

    if args.eval_whole and args.load:
        loss, windows, tokens = evaluate_whole_split(model, val, args.precision)
        print(f"validation loss {loss:.4f} over the whole validation split: {windows} windows of {BLOCK} "
              f"({tokens} tokens)")
        return

    if args.bench:
        if args.bench == "step":
            fig = bench_step(model, train, args.repeat or 30, args.precision)
        else:
            fig, out = bench_generate(model, args.repeat or 5, args.precision)
            text = "".join(vocab[i] for i in out[0, 1:].tolist())
            print(f"# sample: {text[:120]!r}", file=sys.stderr)
        print(f"{fig['name']} {fig['value']:.4g} {fig['unit']} (min {fig['min']:.4g}, max {fig['max']:.4g}, "
              f"n={fig['n']})", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({fig["name"]: {k: fig[k] for k in ("value", "unit", "min", "max", "n")}}, f, indent=2)
        return

    opt = make_optimizer(model)
    model.train()
    t_start = t_last = time.perf_counter()
    val_loss = None
    for i in range(args.iters):
        lr = lr_at(i, args.iters)
        x, y = get_batch(train, BATCH, BLOCK)
        loss = train_step(model, opt, x, y, lr, args.precision)
        it = i + 1
        if it % 100 == 0 or it == args.iters:
            now = time.perf_counter()
            n = 100 if it % 100 == 0 else it % 100
            print(f"iter {it}/{args.iters} loss {loss.item():.4f} lr {lr:.3e} "
                  f"tokens/s {n * BATCH * BLOCK / (now - t_last):.0f}", flush=True)
            t_last = now
        if (args.eval_every > 0 and it % args.eval_every == 0) or it == args.iters:
            t0 = time.perf_counter()
            val_loss = evaluate(model, val, args.seed, args.precision)
            print(f"iter {it}: val loss {val_loss:.4f}", flush=True)
            t_last += time.perf_counter() - t0  # evaluation is not training throughput
    total = time.perf_counter() - t_start
    print(f"final val loss {val_loss:.4f}")
    print(f"total time {total:.1f} s ({total * 1000.0 / max(1, args.iters):.1f} ms/iter)")
    if args.out:
        from safetensors.torch import save_file
        meta = {k: str(v) for k, v in model.config.items()}
        meta.update(torch_version=torch.__version__, seed=str(args.seed), iters=str(args.iters),
                    precision=args.precision, final_val_loss=f"{val_loss:.6f}", vocab=json.dumps("".join(vocab)))
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, args.out, metadata=meta)
        print(f"saved {args.out}")
    if args.eval_whole:
        loss, windows, tokens = evaluate_whole_split(model, val, args.precision)
        print(f"validation loss {loss:.4f} over the whole validation split: {windows} windows of {BLOCK} "
              f"({tokens} tokens)")


if __name__ == "__main__":
    main()
