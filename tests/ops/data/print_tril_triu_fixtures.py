"""Prints the tril/triu results tests/ops/test_copy.cpp hard-codes (run with torch 2.x:
python tests/ops/data/print_tril_triu_fixtures.py). Inputs are aranges the test rebuilds."""
import torch


def cpp(t):
    return "{" + ", ".join(str(int(v)) for v in t.flatten().tolist()) + "}"


print("torch", torch.__version__)
m = torch.arange(1.0, 13.0).view(3, 4)
for d in (-3, -1, 0, 1, 3, 5):
    print(f"// [3, 4] arange(1, 13), diagonal {d}: tril {cpp(torch.tril(m, d))} triu {cpp(torch.triu(m, d))}")
b = torch.arange(1.0, 19.0).view(2, 3, 3)
print(f"// [2, 3, 3] arange(1, 19): tril(-1) {cpp(torch.tril(b, -1))} triu(1) {cpp(torch.triu(b, 1))}")
w = torch.arange(1.0, 9.0).view(4, 2)
print(f"// [4, 2] arange(1, 9): tril {cpp(torch.tril(w))} triu(-2) {cpp(torch.triu(w, -2))}")
print(f"// bool ones [3, 3]: tril {cpp(torch.tril(torch.ones(3, 3, dtype=torch.bool)))}")
for f in (lambda: torch.tril(torch.ones(3)), lambda: torch.triu(torch.tensor(1.0))):
    try:
        f()
    except RuntimeError as e:
        print("//", e)
