# Records what PyTorch's CPU autocast (bfloat16) does to each op graft has
# (autocast.json): the output dtype for float32 inputs, for mixed inputs (the
# first floating tensor bfloat16, the others float32) and for all-bfloat16
# inputs, plus PyTorch's autocast op lists for CPU and CUDA and the float16
# output dtypes the CUDA lists imply (derived, not run: no GPU here).
#
# Rerun from the repository root with a venv that has torch:
#   /work/venv-torch/bin/python tests/autograd/data/make_autocast_fixture.py
#
# The lists are copied from PyTorch's autocast_mode.cpp (CPU) and the
# autocast_mode.h shipped in the wheel (CUDA), cut down to ops graft has or
# may get; the script checks each name against the installed binary's
# AutocastCPU / AutocastCUDA registrations, and the CPU policies against
# what autocast actually does.

import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = {torch.bool: "bool", torch.uint8: "uint8", torch.int32: "int32",
        torch.int64: "int64", torch.bfloat16: "bfloat16", torch.float16: "float16",
        torch.float32: "float32", torch.float64: "float64"}

LISTS = {
    "cpu": {
        "lower": ["conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "baddbmm",
                  "addmm", "_addmm_activation", "addbmm", "linear", "_convolution",
                  "matmul", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d", "prelu", "scaled_dot_product_attention",
                  "_native_multi_head_attention"],
        "fp32": ["avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
                 "max_unpool2d", "fractional_max_pool2d", "reflection_pad1d",
                 "reflection_pad2d", "replication_pad1d", "replication_pad2d",
                 "replication_pad3d", "binary_cross_entropy",
                 "binary_cross_entropy_with_logits", "cross_entropy_loss", "nll_loss",
                 "nll_loss2d", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                 "kl_div", "poisson_nll_loss", "cosine_embedding_loss",
                 "hinge_embedding_loss", "margin_ranking_loss", "soft_margin_loss",
                 "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
                 "ctc_loss", "prod", "cdist", "trace", "quantile", "nanquantile",
                 "grid_sampler", "grid_sampler_2d", "polar", "stft", "fft_fft", "fft_rfft",
                 "inverse", "linalg_inv", "linalg_solve", "linalg_cholesky", "linalg_qr",
                 "linalg_svd", "linalg_eigh"],
        "promote": ["cat", "stack", "index_copy"],
    },
    "cuda": {
        "lower": ["_convolution", "convolution", "conv1d", "conv2d", "conv3d", "conv_tbc",
                  "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
                  "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot",
                  "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
                  "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
                  "_scaled_dot_product_flash_attention", "scaled_dot_product_attention"],
        "fp32": ["exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
                 "pow", "softplus", "acos", "asin", "cosh", "sinh", "tan", "erfinv",
                 "layer_norm", "native_layer_norm", "rms_norm", "group_norm",
                 "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
                 "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss",
                 "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
                 "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
                 "triplet_margin_loss", "multi_margin_loss",
                 "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm",
                 "logsumexp", "upsample_nearest1d", "upsample_nearest2d",
                 "upsample_nearest3d", "upsample_linear1d", "upsample_bilinear2d",
                 "upsample_trilinear3d", "upsample_bicubic2d",
                 # fp32_set_opt_dtype: run in float32 by passing dtype=float32
                 "prod", "softmax", "log_softmax", "cumprod", "cumsum",
                 "linalg_vector_norm", "linalg_matrix_norm", "sum",
                 # fp32_append_dtype
                 "norm"],
        "promote": ["addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot",
                    "grid_sampler", "index_put", "tensordot", "scatter_add"],
    },
}

# op key -> (float tensor shapes, function of those tensors, what "mixed" means)
I = lambda *v: torch.tensor(v, dtype=torch.int64)
MASK = torch.tensor([True, False, True, False])
OPS = {
    "matmul": ([(2, 3), (3, 4)], torch.matmul, "a bf16, b f32"),
    "mm": ([(2, 3), (3, 4)], torch.mm, "a bf16, b f32"),
    "bmm": ([(2, 2, 3), (2, 3, 4)], torch.bmm, "a bf16, b f32"),
    "addmm": ([(2, 3), (3, 4), (4,)], lambda a, b, c: torch.addmm(c, a, b),
              "mat1 bf16, mat2 and bias f32"),
    "baddbmm": ([(2, 2, 3), (2, 3, 4), (2, 2, 4)], lambda a, b, c: torch.baddbmm(c, a, b),
                "batch1 bf16, batch2 and input f32"),
    "linear": ([(2, 3), (4, 3), (4,)], F.linear, "input bf16, weight and bias f32"),
    "conv1d": ([(1, 2, 5), (3, 2, 3), (3,)], F.conv1d, "input bf16, weight and bias f32"),
    "conv2d": ([(1, 2, 5, 5), (3, 2, 3, 3), (3,)], F.conv2d,
               "input bf16, weight and bias f32"),
    "conv_transpose2d": ([(1, 2, 4, 4), (2, 3, 3, 3), (3,)], F.conv_transpose2d,
                         "input bf16, weight and bias f32"),
    "scaled_dot_product_attention": ([(1, 2, 4, 8)] * 3, F.scaled_dot_product_attention,
                                     "q bf16, k and v f32"),
    "add": ([(4,), (4,)], torch.add, "a bf16, b f32"),
    "mul": ([(4,), (4,)], torch.mul, "a bf16, b f32"),
    "relu": ([(4,)], F.relu, None),
    "gelu": ([(4,)], F.gelu, None),
    "tanh": ([(4,)], torch.tanh, None),
    "exp": ([(4,)], torch.exp, None),
    "softmax": ([(2, 4)], lambda a: F.softmax(a, -1), None),
    "log_softmax": ([(2, 4)], lambda a: F.log_softmax(a, -1), None),
    "layer_norm": ([(2, 4), (4,), (4,)], lambda a, w, b: F.layer_norm(a, (4,), w, b),
                   "input bf16, weight and bias f32"),
    "batch_norm": ([(2, 3, 4), (3,), (3,), (3,), (3,)],
                   lambda a, m, v, w, b: F.batch_norm(a, m, v + 0.5, w, b, training=False),
                   "input bf16, running stats, weight and bias f32 (eval)"),
    "sum": ([(2, 4)], torch.sum, None),
    "mean": ([(2, 4)], torch.mean, None),
    "cat": ([(2, 3), (2, 3)], lambda a, b: torch.cat([a, b]), "[bf16, f32]"),
    "stack": ([(2, 3), (2, 3)], lambda a, b: torch.stack([a, b]), "[bf16, f32]"),
    "index_select": ([(4, 3)], lambda a: torch.index_select(a, 0, I(2, 0)), None),
    "gather": ([(3, 4)], lambda a: torch.gather(a, 1, I([0, 1], [2, 3], [1, 1])), None),
    "embedding": ([(10, 3)], lambda w: F.embedding(I(1, 7, 7), w), None),
    "cross_entropy": ([(3, 5), (5,)], lambda a, w: F.cross_entropy(a, I(0, 4, 2), weight=w),
                      "input bf16, class weight f32 (int64 targets)"),
    "nll_loss": ([(3, 5), (5,)], lambda a, w: F.nll_loss(a, I(0, 4, 2), weight=w),
                 "input bf16, class weight f32 (int64 targets)"),
    "mse_loss": ([(4,), (4,)], F.mse_loss, "input bf16, target f32"),
    "binary_cross_entropy_with_logits": ([(4,), (4,)], F.binary_cross_entropy_with_logits,
                                         "input bf16, target f32"),
    "max_pool2d": ([(1, 1, 4, 4)], lambda a: F.max_pool2d(a, 2), None),
    "avg_pool2d": ([(1, 1, 4, 4)], lambda a: F.avg_pool2d(a, 2), None),
    "dropout": ([(4,)], lambda a: F.dropout(a, 0.5, training=False), None),
    "where": ([(4,), (4,)], lambda a, b: torch.where(MASK, a, b), "self bf16, other f32"),
    "masked_fill": ([(4,), ()], lambda a, v: a.masked_fill(MASK, v),
                    "self bf16, 0-dim value tensor f32"),
}

# Which PyTorch name decides each op's policy, where it isn't the key itself.
PT_NAME = {"cpu": {"cross_entropy": "cross_entropy_loss"}, "cuda": {}}
CUDA_COMPOSITE = {"cross_entropy": "fp32"}  # log_softmax and nll_loss are both fp32


def policy(device, key):
    name = PT_NAME[device].get(key, key)
    for pol, names in LISTS[device].items():
        if name in names:
            return pol
    if device == "cuda" and key in CUDA_COMPOSITE:
        return CUDA_COMPOSITE[key] + " (composite: log_softmax and nll_loss)"
    return None


def run(key, dtypes, autocast=True, low=torch.bfloat16):
    shapes, fn, _ = OPS[key]
    g = torch.Generator().manual_seed(0)
    args = [torch.rand(s, generator=g).to(d) for s, d in zip(shapes, dtypes)]
    try:
        with torch.autocast("cpu", dtype=low, enabled=autocast):
            return NAME[fn(*args).dtype]
    except RuntimeError as e:
        return "error: " + str(e).splitlines()[0]


def check_registrations():
    ops = torch._C._dispatch_get_all_op_names()
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for device, key in (("cpu", "AutocastCPU"), ("cuda", "AutocastCUDA")):
        registered = {o.split(".")[0][6:] for o in ops if o.startswith("aten::") and has(o, key)}
        names = [n for pol in LISTS[device].values() for n in pol]
        missing = [n for n in names if n not in registered]
        assert not missing, (device, missing)


def main():
    check_registrations()
    f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
    ops, cuda = {}, {}
    for key, (shapes, _, mixed) in OPS.items():
        n = len(shapes)
        rec = {
            "mixed_inputs": mixed,
            "float32": run(key, [f32] * n),
            "mixed": run(key, [bf16] + [f32] * (n - 1)) if mixed else None,
            "bfloat16": run(key, [bf16] * n),
            "mixed_no_autocast": run(key, [bf16] + [f32] * (n - 1), False) if mixed else None,
            "policy": {"cpu": policy("cpu", key), "cuda": policy("cuda", key)},
        }
        cpu_pol = rec["policy"]["cpu"]
        # The CPU list must agree with what autocast does here.
        if cpu_pol == "lower":
            assert rec["float32"] == "bfloat16", key
        elif cpu_pol == "fp32":
            assert rec["bfloat16"] == "float32", key
        else:
            assert rec["float32"] == "float32", key
        ops[key] = rec
        # CUDA float16, derived from the lists; unlisted ops keep the dtype
        # their kernels give natively (measured here on CPU, f16 + f32).
        pol = (rec["policy"]["cuda"] or "none").split(" ")[0]
        natural = run(key, [f16] + [f32] * (n - 1), False) if mixed else None
        out = {"lower": ("float16", "float16", "float16"),
               "fp32": ("float32", "float32", "float32"),
               "promote": ("float32", "float32", "float16"),
               "none": ("float32", natural, "float16")}[pol]
        cuda[key] = {"float32": out[0], "mixed": out[1] if mixed else None, "float16": out[2]}
    notes = (
        "Run on CPU under torch.autocast('cpu', dtype=torch.bfloat16). 'mixed' = the first "
        "floating tensor bfloat16, the others float32 (see mixed_inputs); "
        "'mixed_no_autocast' = the same inputs with autocast off. 'policy' per device: "
        "lower / fp32 / promote from the lists, null = unlisted (runs in the dtype its "
        "inputs give). 'lists' come from PyTorch's aten/src/ATen/autocast_mode.cpp (CPU, "
        "same as the docs' CPU Op Reference) and torch/include/ATen/autocast_mode.h of this "
        "wheel (CUDA; newer than the docs, which omit scaled_dot_product_attention and "
        "rms_norm), cut down to ops graft has or may get, every name checked against the "
        "binary's AutocastCPU/AutocastCUDA registrations. CUDA 'fp32' merges fp32, "
        "fp32_set_opt_dtype (softmax, log_softmax, sum, prod, cumsum...) and "
        "fp32_append_dtype (norm). 'cuda_fp16' is derived from the CUDA lists, not run (no "
        "GPU): lower -> float16, fp32 -> float32, promote -> widest input, unlisted -> the "
        "op's native result for those inputs (for mixed: measured on CPU with float16 + "
        "float32, autocast off). cross_entropy is not listed for CUDA but decomposes into "
        "log_softmax and nll_loss, both fp32, so it is float32."
    )
    out = {"torch_version": torch.__version__, "notes": notes, "ops": ops,
           "lists": LISTS, "cuda_fp16": cuda}
    with open(os.path.join(HERE, "autocast.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
