# Makes tests/nn/data/gpt_fixture.safetensors: reference tensors from PyTorch for graft's nn::GPT
# (nn/gpt.h), a tiny configuration of the model of tools/bench/pytorch_gpt.py.
#
# Run from the repository root:
#   /work/torch-venv/bin/python tests/nn/data/make_gpt_fixture.py
# (any Python with torch and safetensors; the torch version is stored in the file's metadata as
# "torch_version").
#
# Config (also in the metadata, as strings): vocab_size 11, block_size 8, n_layer 2, n_head 2,
# n_embd 16, bias true, dropout 0. Parameters under graft's names (wte.weight, wpe.weight,
# h.{i}.ln_1.*, h.{i}.attn.c_attn.*, h.{i}.attn.c_proj.*, h.{i}.ln_2.*, h.{i}.mlp.c_fc.*,
# h.{i}.mlp.c_proj.*, ln_f.*; the head is tied to wte.weight and has no entry), float32: drawn
# with torch.manual_seed(0) by the GPT-2 init (Linear and Embedding weights N(0, 0.02), the
# c_proj weights N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm 1 / 0), then perturbed so
# that they are exercised: every LayerNorm weight 1 + 0.1 N(0, 1), every LayerNorm bias and every
# Linear bias 0.1 N(0, 1).
#
# Inputs: "idx" [2, 8] int64 in [0, 11), "targets" [2, 8] int64.
# References, float64, computed in float64 from the float32 parameters (widened exactly):
#   "logits"        [2, 8, 11]  forward(idx)
#   "logits_short"  [2, 5, 11]  forward(idx[:, :5]) (positions start at 0 for any length)
#   "loss"          []          mean cross-entropy of logits against targets over all 16 tokens
#   "grad.<name>"   d loss / d parameter, the parameter's shape (wte.weight's gradient holds
#                   both the embedding's and the tied head's contributions)
# The reference is written out by hand below (explicit attention with a causal mask, erf GELU,
# LayerNorm eps 1e-5) and checked against tools/bench/pytorch_gpt.py's GPT module in float64
# (logits, loss and gradients) and in float32 (the figures printed show the float32 gap a test's
# tolerance has to allow). Deterministic: torch.manual_seed(0) at the start.

import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

torch.manual_seed(0)
torch.set_default_dtype(torch.float32)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
OUT_PATH = os.path.join(HERE, "gpt_fixture.safetensors")
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
import pytorch_gpt  # noqa: E402  (the model the fixture is checked against)

CFG = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.0, bias=True)
V, T, L, H, C = CFG["vocab_size"], CFG["block_size"], CFG["n_layer"], CFG["n_head"], CFG["n_embd"]

# ---------------------------------------------------------------- parameters (float32)
model = pytorch_gpt.GPT(**CFG)  # GPT-2 init, drawn after torch.manual_seed(0)
with torch.no_grad():
    for name, p in model.named_parameters():
        if ".ln_" in name or name.startswith("ln_f"):
            if name.endswith(".weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
        elif name.endswith(".bias"):
            p.copy_(0.1 * torch.randn_like(p))
params32 = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
assert set(params32) == {n for n, _ in model.named_parameters()}, "the state dict is the parameters"
assert "lm_head.weight" not in params32

idx = torch.randint(0, V, (2, T), dtype=torch.int64)
targets = torch.randint(0, V, (2, T), dtype=torch.int64)


# ---------------------------------------------------------------- the reference, by hand
def layer_norm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)  # biased, as LayerNorm
    return (x - mu) / torch.sqrt(var + 1e-5) * w + b


def linear(x, w, b):
    return x @ w.T + b


def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def reference_forward(P, idx, causal_mask=True):
    B, t = idx.shape
    x = P["wte.weight"][idx] + P["wpe.weight"][torch.arange(t)]
    d = C // H
    causal = torch.ones(t, t, dtype=torch.bool).tril() if causal_mask else torch.ones(t, t, dtype=torch.bool)
    for i in range(L):
        p = lambda n: P[f"h.{i}.{n}"]  # noqa: E731
        a = linear(layer_norm(x, p("ln_1.weight"), p("ln_1.bias")), p("attn.c_attn.weight"), p("attn.c_attn.bias"))
        q, k, v = a[..., :C], a[..., C:2 * C], a[..., 2 * C:]  # rows of c_attn: q, k, v
        q, k, v = (z.reshape(B, t, H, d).transpose(1, 2) for z in (q, k, v))  # [B, H, t, d]
        s = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        s = s.masked_fill(~causal, float("-inf"))
        y = torch.softmax(s, -1) @ v  # [B, H, t, d]
        y = y.transpose(1, 2).reshape(B, t, C)
        x = x + linear(y, p("attn.c_proj.weight"), p("attn.c_proj.bias"))
        m = gelu(linear(layer_norm(x, p("ln_2.weight"), p("ln_2.bias")), p("mlp.c_fc.weight"), p("mlp.c_fc.bias")))
        x = x + linear(m, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
    return layer_norm(x, P["ln_f.weight"], P["ln_f.bias"]) @ P["wte.weight"].T  # tied head


P64 = {k: v.double().requires_grad_() for k, v in params32.items()}
logits = reference_forward(P64, idx)
loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
grads = torch.autograd.grad(loss, [P64[k] for k in P64])
grads = dict(zip(P64, grads))
with torch.no_grad():
    logits_short = reference_forward(P64, idx[:, :5])

T_OUT = {}


def put(name, t):
    assert name not in T_OUT, name
    T_OUT[name] = t.detach().clone().contiguous()


for k, v in params32.items():
    put(k, v)
put("idx", idx)
put("targets", targets)
put("logits", logits)
put("logits_short", logits_short)
put("loss", loss)
for k, g in grads.items():
    put("grad." + k, g)

# ---------------------------------------------------------------- checks against pytorch_gpt.GPT
print("== checks")
# positions count from 0 for a shorter input: logits_short is a prefix of logits (causality)
print("logits_short vs logits[:, :5] (causal prefix): %.3g" % (logits_short - logits[:, :5]).abs().max().item())
assert torch.allclose(logits_short, logits[:, :5], atol=1e-12)

m64 = pytorch_gpt.GPT(**CFG).double()
m64.load_state_dict({k: v.double() for k, v in params32.items()})
m64.eval()
l64 = m64(idx)
loss64 = F.cross_entropy(l64.reshape(-1, V), targets.reshape(-1))
loss64.backward()
print("pytorch_gpt.GPT float64 vs hand reference: logits %.3g, loss %.3g, grads %.3g"
      % ((l64 - logits).abs().max().item(), abs(loss64.item() - loss.item()),
         max((p.grad - grads[n]).abs().max().item() for n, p in m64.named_parameters())))
assert torch.allclose(l64, logits, atol=1e-12, rtol=0)
assert all(torch.allclose(p.grad, grads[n], atol=1e-12, rtol=0) for n, p in m64.named_parameters())
assert torch.allclose(m64(idx[:, :5]), logits_short, atol=1e-12, rtol=0)

m32 = pytorch_gpt.GPT(**CFG)
m32.load_state_dict(params32)
m32.eval()
l32 = m32(idx)
loss32 = F.cross_entropy(l32.reshape(-1, V), targets.reshape(-1))
loss32.backward()
print("float32 (PyTorch) vs float64 reference: logits %.3g, loss %.3g, grads max abs %.3g, max rel %.3g"
      % ((l32.double() - logits).abs().max().item(), abs(loss32.item() - loss.item()),
         max((p.grad.double() - grads[n]).abs().max().item() for n, p in m32.named_parameters()),
         max(((p.grad.double() - grads[n]).abs().max() / grads[n].abs().max()).item()
             for n, p in m32.named_parameters())))

# How far a few plausible mistakes move the outputs (not saved): the fixture has to tell them apart.
print("== sensitivity (float64): max |change| of logits / of grad.h.0.attn.c_attn.weight")


def variant(swap_qk=False, causal_mask=True):
    P = {k: v.double() for k, v in params32.items()}
    if swap_qk:
        for i in range(L):
            for n in ("weight", "bias"):
                w = P[f"h.{i}.attn.c_attn.{n}"]
                P[f"h.{i}.attn.c_attn.{n}"] = torch.cat([w[C:2 * C], w[:C], w[2 * C:]])
    P = {k: v.requires_grad_() for k, v in P.items()}
    lg = reference_forward(P, idx, causal_mask)
    g = torch.autograd.grad(F.cross_entropy(lg.reshape(-1, V), targets.reshape(-1)), P["h.0.attn.c_attn.weight"])[0]
    if swap_qk:
        g = torch.cat([g[C:2 * C], g[:C], g[2 * C:]])
    return (lg - logits).abs().max().item(), (g - grads["h.0.attn.c_attn.weight"]).abs().max().item()


print("q and k swapped: %.3g / %.3g" % variant(swap_qk=True))
print("no causal mask:  %.3g / %.3g" % variant(causal_mask=False))
print("(scale: max |logits| %.3g, max |grad.h.0.attn.c_attn.weight| %.3g)"
      % (logits.abs().max().item(), grads["h.0.attn.c_attn.weight"].abs().max().item()))

# ---------------------------------------------------------------- save
meta = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in CFG.items()}
meta.update(torch_version=torch.__version__, layer_norm_eps="1e-05", gelu="erf",
            reference_dtype="float64", param_dtype="float32", perturbation="ln weight 1+0.1N, ln/linear bias 0.1N",
            loss="mean cross-entropy over all B*T tokens")
for name, t in T_OUT.items():
    assert t.is_contiguous(), name
    if name in ("idx", "targets"):
        assert t.dtype == torch.int64, name
    elif name in params32:
        assert t.dtype == torch.float32, (name, t.dtype)
    else:
        assert t.dtype == torch.float64, (name, t.dtype)
save_file(T_OUT, OUT_PATH, metadata=meta)

back = load_file(OUT_PATH)
assert set(back) == set(T_OUT)
for name in sorted(back):
    assert torch.equal(back[name], T_OUT[name]), name
    print("%-40s %-8s %s" % (name, str(back[name].dtype).replace("torch.", ""), list(back[name].shape)))
print("loss %.10f; %d tensors, %d bytes, torch %s" % (loss.item(), len(back), os.path.getsize(OUT_PATH),
                                                   torch.__version__))
