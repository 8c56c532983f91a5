"""Prints the values tests/nn/test_clip_grad.cpp hard-codes: torch.nn.utils.clip_grad_norm_ on
fixed gradients (run with torch 2.x: python tests/nn/data/print_clip_grad_fixtures.py)."""
import torch
from torch.nn.utils import clip_grad_norm_

torch.set_printoptions(precision=17)


def params(grads):
    out = []
    for g in grads:
        p = torch.zeros_like(g, requires_grad=True)
        p.grad = g.clone()
        out.append(p)
    return out


def show(title, grads, max_norm, norm_type):
    ps = params(grads)
    total = clip_grad_norm_(ps, max_norm, norm_type)
    print(f"// {title}: max_norm {max_norm}, norm_type {norm_type}")
    print(f"//   total {total.item()!r} ({total.dtype})")
    for p in ps:
        print(f"//   grad {[float(v) for v in p.grad.flatten().tolist()]} ({p.grad.dtype})")


a = torch.tensor([3.0, 4.0, 0.0])
b = torch.tensor([[1.0, -2.0], [0.5, 2.5]], dtype=torch.float64)
for norm_type in (2.0, 1.0, float("inf"), 3.0, 0.5):
    show("mixed float32/float64", [a, b], 1.0, norm_type)
show("under max_norm", [a, b], 100.0, 2.0)
show("bfloat16", [torch.tensor([3.0, 4.0, 12.0], dtype=torch.bfloat16)], 1.0, 2.0)
show("non-finite", [torch.tensor([3.0, float("inf"), 0.5])], 10.0, 2.0)
print(f"// empty: {clip_grad_norm_([], 1.0)!r}")
for nt in (2.0, float("inf"), 0.5):
    p = params([torch.tensor([float("nan")])])
    try:
        clip_grad_norm_(p, 1.0, nt, error_if_nonfinite=True)
    except RuntimeError as e:
        print("//", e)
