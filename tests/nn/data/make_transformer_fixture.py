# Makes tests/nn/data/transformer_fixture.safetensors: reference tensors from
# PyTorch for graft's transformer pieces (scaled_dot_product_attention,
# nn.MultiheadAttention, nn.TransformerEncoderLayer pre-/post-norm and a small
# vision transformer with its loss and parameter gradients).
#
# Run from the repository root:
#   build-bench/torch-venv/bin/python tests/nn/data/make_transformer_fixture.py
# Generated with torch 2.15 (the exact version is stored in the file's
# metadata as "torch_version").
#
# Every output is computed with autograd enabled (parameters require grad,
# no torch.no_grad) and modules in eval() mode with dropout 0, so PyTorch's
# inference "fast path" of MultiheadAttention / TransformerEncoderLayer is not
# taken; outputs are detached and cloned. float32 everywhere, bool masks,
# int64 labels. Deterministic: torch.manual_seed(0) at the start.

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

torch.manual_seed(0)
torch.set_default_dtype(torch.float32)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "transformer_fixture.safetensors")

T = {}


def put(name, t):
    assert name not in T, name
    T[name] = t.detach().clone().contiguous()


def put_state(prefix, module):
    for k, v in module.state_dict().items():
        put(prefix + k, v)


# ---------------------------------------------------------------- 1. SDPA
q = torch.randn(2, 3, 5, 8, requires_grad=True)
k = torch.randn(2, 3, 6, 8, requires_grad=True)
v = torch.randn(2, 3, 6, 4, requires_grad=True)
grad_out = torch.randn(2, 3, 5, 4)

bool_mask = torch.rand(5, 6) < 0.6  # True = takes part (SDPA convention)
bool_mask[2] = False  # one fully masked row
for i in range(5):
    if i != 2 and not bool_mask[i].any():
        bool_mask[i, torch.randint(0, 6, ()).item()] = True
assert not bool_mask[2].any()
assert all(bool_mask[i].any() for i in range(5) if i != 2)

float_mask = torch.randn(5, 6)
for i, j in [(0, 1), (1, 4), (3, 0), (3, 5), (4, 2)]:
    float_mask[i, j] = float("-inf")
assert all(torch.isfinite(float_mask[i]).any() for i in range(5))

put("sdpa.q", q)
put("sdpa.k", k)
put("sdpa.v", v)
put("sdpa.grad_out", grad_out)
put("sdpa.bool_mask", bool_mask)
put("sdpa.float_mask", float_mask)


def sdpa_grads(**kw):
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    gq, gk, gv = torch.autograd.grad((out * grad_out).sum(), (q, k, v))
    return out, gq, gk, gv


out_plain, gq, gk, gv = sdpa_grads()
put("sdpa.out.plain", out_plain)
put("sdpa.grad.plain.q", gq)
put("sdpa.grad.plain.k", gk)
put("sdpa.grad.plain.v", gv)

out_causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
put("sdpa.out.causal", out_causal)

out_bool, gqb, gkb, gvb = sdpa_grads(attn_mask=bool_mask)
put("sdpa.out.bool", out_bool)
put("sdpa.grad.bool.q", gqb)
put("sdpa.grad.bool.k", gkb)
put("sdpa.grad.bool.v", gvb)

put("sdpa.out.float", F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask))
put("sdpa.out.scale", F.scaled_dot_product_attention(q, k, v, scale=0.3))

# Report: fully masked row, causal alignment.
print("== SDPA")
row = out_bool[:, :, 2]
print("fully masked row output: nan=%s, all zero=%s, sample=%s"
      % (torch.isnan(row).any().item(), (row == 0).all().item(), row[0, 0].tolist()))
print("grad q at fully masked row: nan=%s, all zero=%s"
      % (torch.isnan(gqb[:, :, 2]).any().item(), (gqb[:, :, 2] == 0).all().item()))
print("grad k/v any nan: %s / %s" % (torch.isnan(gkb).any().item(), torch.isnan(gvb).any().item()))
with torch.no_grad():
    tl = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(5, 6, dtype=torch.bool).tril())
    br = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(5, 6, dtype=torch.bool).tril(diagonal=1))
    print("is_causal L=5,S=6 == top-left tril(ones(L,S)): max diff %.3g; vs bottom-right tril(S-L): %.3g"
          % ((out_causal - tl).abs().max().item(), (out_causal - br).abs().max().item()))
    # Manual math reference for the bool-mask case, rows with at least one key.
    s = q @ k.transpose(-2, -1) / 8 ** 0.5
    s = s.masked_fill(~bool_mask, float("-inf"))
    ref = torch.softmax(s, -1) @ v
    ok = [i for i in range(5) if i != 2]
    print("bool mask vs manual softmax (unmasked rows): max diff %.3g"
          % (out_bool[:, :, ok] - ref[:, :, ok]).abs().max().item())
    print("manual softmax on the fully masked row gives nan: %s" % torch.isnan(ref[:, :, 2]).all().item())
    ref_s = torch.softmax(q @ k.transpose(-2, -1) * 0.3, -1) @ v
    print("scale=0.3 vs manual: %.3g" % (T["sdpa.out.scale"] - ref_s).abs().max().item())

# ---------------------------------------------------------------- 2. MHA
print("== MHA")
mha = nn.MultiheadAttention(16, 4, batch_first=True)
with torch.no_grad():
    mha.in_proj_bias.add_(torch.randn_like(mha.in_proj_bias) * 0.1)
    mha.out_proj.bias.add_(torch.randn_like(mha.out_proj.bias) * 0.1)
mha.eval()
put_state("mha.", mha)

query = torch.randn(2, 5, 16)
key = torch.randn(2, 7, 16)
value = torch.randn(2, 7, 16)
attn_mask_bool = torch.rand(5, 7) < 0.35  # True = NOT allowed (MHA convention)
for i in range(5):
    if attn_mask_bool[i].all():
        attn_mask_bool[i, torch.randint(0, 7, ()).item()] = False
assert all((~attn_mask_bool[i]).any() for i in range(5))
attn_mask_float = torch.randn(5, 7)
attn_mask_float[1, 3] = float("-inf")
attn_mask_float[4, 0] = float("-inf")
key_padding_mask = torch.zeros(2, 7, dtype=torch.bool)  # True = ignore
key_padding_mask[0, 5:] = True
key_padding_mask[1, 6:] = True

put("mha.in.query", query)
put("mha.in.key", key)
put("mha.in.value", value)
put("mha.in.attn_mask_bool", attn_mask_bool)
put("mha.in.attn_mask_float", attn_mask_float)
put("mha.in.key_padding_mask", key_padding_mask)

assert torch.is_grad_enabled() and mha.in_proj_weight.requires_grad
o, w = mha(query, query, query, need_weights=True, average_attn_weights=True)
put("mha.out.self", o)
put("mha.out.self_weights", w)
o, _ = mha(query, key, value, need_weights=False)
put("mha.out.cross", o)
o, _ = mha(query, key, value, attn_mask=attn_mask_bool, need_weights=False)
put("mha.out.cross_bool_mask", o)
o, _ = mha(query, key, value, attn_mask=attn_mask_float, need_weights=False)
put("mha.out.cross_float_mask", o)
o, _ = mha(query, key, value, key_padding_mask=key_padding_mask, need_weights=False)
put("mha.out.key_padding", o)
o, w = mha(query, key, value, need_weights=True, average_attn_weights=False)
put("mha.out.cross_weights_per_head", w)
causal_mask = nn.Transformer.generate_square_subsequent_mask(5)
o, _ = mha(query, query, query, attn_mask=causal_mask, is_causal=True)
put("mha.out.causal", o)
o2, _ = mha(query, query, query, attn_mask=causal_mask, is_causal=True, need_weights=False)
print("causal need_weights=True vs False: %.3g" % (o - o2).abs().max().item())
print("causal mask (float -inf above diagonal):", causal_mask.tolist()[1])
assert torch.allclose(T["mha.out.cross_weights_per_head"].mean(1),
                      mha(query, key, value, need_weights=True)[1].detach(), atol=1e-6)

# Compare with the inference fast path (no_grad) for the record.
with torch.no_grad():
    fo, _ = mha(query, query, query, need_weights=False)
    print("self-attn fast path (no_grad, need_weights=False) vs autograd path: %.3g"
          % (fo - T["mha.out.self"]).abs().max().item())

# ---------------------------------------------------------------- 3. encoder layers
print("== Encoder layers")


def perturb_layer(layer):
    with torch.no_grad():
        for ln in (layer.norm1, layer.norm2):
            ln.weight.copy_(1 + 0.1 * torch.randn_like(ln.weight))
            ln.bias.copy_(0.1 * torch.randn_like(ln.bias))
        layer.self_attn.in_proj_bias.add_(0.1 * torch.randn_like(layer.self_attn.in_proj_bias))
        layer.self_attn.out_proj.bias.add_(0.1 * torch.randn_like(layer.self_attn.out_proj.bias))


enc_pre = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, activation="gelu",
                                     batch_first=True, norm_first=True)
perturb_layer(enc_pre)
enc_pre.eval()
enc_post = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, activation="relu",
                                      batch_first=True, norm_first=False)
perturb_layer(enc_post)
enc_post.eval()
put_state("enc_pre.", enc_pre)
put_state("enc_post.", enc_post)

src = torch.randn(2, 5, 16)
src_kpm = torch.zeros(2, 5, dtype=torch.bool)
src_kpm[0, 4] = True
put("enc.in.src", src)
put("enc.in.src_key_padding_mask", src_kpm)

for name, layer in (("enc_pre", enc_pre), ("enc_post", enc_post)):
    put(name + ".out", layer(src))
    put(name + ".out_padded", layer(src, src_key_padding_mask=src_kpm))
    with torch.no_grad():
        f = layer(src)
        fp = layer(src, src_key_padding_mask=src_kpm)
        print("%s fast path (no_grad) vs autograd: plain %.3g, padded %.3g (padded row of batch 0: %s)"
              % (name, (f - T[name + ".out"]).abs().max().item(),
                 (fp - T[name + ".out_padded"]).abs().max().item(),
                 "nested/zero" if (fp[0, 4] == 0).all() else "computed"))
    print("%s padded vs plain, batch 1 (no padding): %.3g; batch 0 unpadded rows: %.3g"
          % (name, (T[name + ".out_padded"][1] - T[name + ".out"][1]).abs().max().item(),
             (T[name + ".out_padded"][0, :4] - T[name + ".out"][0, :4]).abs().max().item()))


# ---------------------------------------------------------------- 4. ViT
class PatchEmbed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Conv2d(1, dim, kernel_size=7, stride=7)


class PosEmbed(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, dim) * 0.02)


class TinyViT(nn.Module):
    def __init__(self, dim=16, depth=2, heads=4, num_classes=10, image=28, patch=7):
        super().__init__()
        num_patches = (image // patch) ** 2
        self.patch_embed = PatchEmbed(dim)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos_embed = PosEmbed(num_patches + 1, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        n = x.shape[0]
        p = self.patch_embed.proj(x)  # [N, dim, 4, 4]
        p = p.flatten(2).transpose(1, 2)  # [N, 16, dim]
        x = torch.cat([self.cls_token.expand(n, -1, -1), p], 1)  # [N, 17, dim]
        x = x + self.pos_embed.weight[: x.shape[1]]
        x = self.encoder(x)
        x = self.norm(x)
        return self.head(x[:, 0])


print("== ViT")
vit = TinyViT()
vit.eval()
put_state("vit.", vit)
x = torch.randn(3, 1, 28, 28)
labels = torch.randint(0, 10, (3,), dtype=torch.int64)
put("vit.in.x", x)
put("vit.in.labels", labels)
logits = vit(x)
loss = F.cross_entropy(logits, labels)
put("vit.out.logits", logits)
put("vit.out.loss", loss)
loss.backward()
for n_, p_ in vit.named_parameters():
    assert p_.grad is not None, n_
    put("vit.grad." + n_, p_.grad)
print("loss %.6f, params %d" % (loss.item(), sum(p.numel() for p in vit.parameters())))

# ---------------------------------------------------------------- save
meta = {"torch_version": torch.__version__}
for name, t in T.items():
    assert t.is_contiguous(), name
    if name in ("sdpa.bool_mask", "mha.in.attn_mask_bool", "mha.in.key_padding_mask",
                "enc.in.src_key_padding_mask"):
        assert t.dtype == torch.bool, name
    elif name == "vit.in.labels":
        assert t.dtype == torch.int64, name
    else:
        assert t.dtype == torch.float32, (name, t.dtype)
save_file(T, OUT_PATH, metadata=meta)

back = load_file(OUT_PATH)
assert set(back) == set(T)
for name in sorted(back):
    assert torch.equal(back[name], T[name]) or (back[name].isnan() == T[name].isnan()).all(), name
    print("%-55s %-8s %s" % (name, str(back[name].dtype).replace("torch.", ""), list(back[name].shape)))
print("%d tensors, %d bytes, torch %s" % (len(back), os.path.getsize(OUT_PATH), torch.__version__))


# ---------------------------------------------------------------- 5. init statistics (not saved)
def init_stats():
    print("== init statistics")
    torch.manual_seed(1)
    E = 64
    m = nn.MultiheadAttention(E, 4, batch_first=True)
    xb = (6.0 / (E + 3 * E)) ** 0.5
    print("mha.in_proj_weight %s max|w| %.4f; xavier_uniform bound sqrt(6/(E+3E)) = %.4f, "
          "sqrt(6/(E+E)) = %.4f" % (list(m.in_proj_weight.shape), m.in_proj_weight.abs().max().item(),
                                     xb, (6.0 / (2 * E)) ** 0.5))
    print("mha.in_proj_bias all zero: %s" % (m.in_proj_bias == 0).all().item())
    print("mha.out_proj.weight max|w| %.4f; 1/sqrt(E) = %.4f" % (m.out_proj.weight.abs().max().item(), E ** -0.5))
    print("mha.out_proj.bias all zero: %s" % (m.out_proj.bias == 0).all().item())
    l = nn.TransformerEncoderLayer(E, 4, dim_feedforward=128, batch_first=True)
    for nm in ("linear1", "linear2"):
        lin = getattr(l, nm)
        fan_in = lin.in_features
        print("%s.weight %s max|w| %.4f, bias max|b| %.4f, bias zero %s; 1/sqrt(fan_in=%d) = %.4f"
              % (nm, list(lin.weight.shape), lin.weight.abs().max().item(), lin.bias.abs().max().item(),
                 (lin.bias == 0).all().item(), fan_in, fan_in ** -0.5))
    print("layer.self_attn.in_proj_weight max|w| %.4f (xavier bound %.4f), in_proj_bias zero %s, "
          "out_proj.bias zero %s" % (l.self_attn.in_proj_weight.abs().max().item(), xb,
                                     (l.self_attn.in_proj_bias == 0).all().item(),
                                     (l.self_attn.out_proj.bias == 0).all().item()))
    print("norm1 weight ones %s bias zeros %s" % ((l.norm1.weight == 1).all().item(), (l.norm1.bias == 0).all().item()))
    enc = nn.TransformerEncoder(l, 3, enable_nested_tensor=False)
    same = all(torch.equal(a, b) for a, b in zip(enc.layers[0].parameters(), enc.layers[2].parameters()))
    same_src = all(torch.equal(a, b) for a, b in zip(l.parameters(), enc.layers[1].parameters()))
    shared = enc.layers[0].linear1.weight is enc.layers[1].linear1.weight or enc.layers[0] is l
    print("TransformerEncoder: layers identical to each other %s, to the template %s, share storage %s"
          % (same, same_src, shared))


init_stats()
