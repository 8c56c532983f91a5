"""Prints the expected topk indices that tests/ops/test_sort.cpp hard-codes (run with torch 2.x on
the CPU: python tests/ops/data/print_topk_fixtures.py). The inputs are formulas the test rebuilds
in C++; ties are everywhere, so the indices pin PyTorch's CPU order of equal values."""
import torch


def cpp(xs):
    return "{" + ", ".join(str(int(v)) for v in xs) + "}"


def show(name, x, k, largest, sorted_=True):
    v, i = torch.topk(x, k, largest=largest, sorted=sorted_)
    print(f"  // {name} k={k} largest={largest} sorted={sorted_}")
    print(f"  {{{k}, {str(largest).lower()}, {str(sorted_).lower()}, {cpp(i.flatten().tolist())}}},")


print("torch", torch.__version__)
print("// small: [1, 3, 3, 2, 3, 1]")
small = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 1.0])
for largest in (True, False):
    for k in range(0, 7):
        show("small", small, k, largest)

print("// vocab: [3, 96], x[r][j] = (j * (r + 3) + r) % 5")
vocab = torch.tensor([[float((j * (r + 3) + r) % 5) for j in range(96)] for r in range(3)])
for largest in (True, False):
    for k in (1, 2, 3, 5, 10, 20, 50, 96):
        show("vocab", vocab, k, largest)
for k in (10, 96):
    show("vocab", vocab, k, True, False)

print("// long: [200], x[j] = (j * 13) % 7 (k * 64 <= 200 takes the partial sort)")
long_row = torch.tensor([float((j * 13) % 7) for j in range(200)])
for largest in (True, False):
    for k in (1, 3, 4):
        show("long", long_row, k, largest)

print("// nan: [1, nan, 3, nan, -inf, inf, 2]")
nan, inf = float("nan"), float("inf")
y = torch.tensor([1.0, nan, 3.0, nan, -inf, inf, 2.0])
for largest in (True, False):
    for k in (1, 3, 7):
        show("nan", y, k, largest)

print("// dim 0 of [4, 2, 3], x[a][b][c] = (a * 2 + b + c) % 3, k = 2")
cube = torch.tensor([[[float((a * 2 + b + c) % 3) for c in range(3)] for b in range(2)] for a in range(4)])
for largest in (True, False):
    v, i = torch.topk(cube, 2, dim=0, largest=largest)
    print(f"  // largest={largest}: values {cpp(v.flatten().tolist())} indices {cpp(i.flatten().tolist())}")

print("// dtypes: [3, 1, 7, 7, 0], k = 2")
for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8):
    v, i = torch.topk(torch.tensor([3.0, 1, 7, 7, 0]).to(dt), 2)
    print(f"  // {dt}: values {cpp(v.tolist())} indices {cpp(i.tolist())}")
print("// nan row in float32 (largest) and bfloat16 (smallest), k = 3")
print(f"  // {cpp(torch.topk(y.float(), 3).indices.tolist())} {cpp(torch.topk(y.bfloat16(), 3, largest=False).indices.tolist())}")
