"""Prints torch.multinomial's outcome for the argument and weight errors tests/ops/test_random.cpp
checks (run with torch 2.x: python tests/ops/data/print_multinomial_errors.py). The samples
themselves are graft's own (its generator is not PyTorch's), so only the messages are compared."""
import torch

nan, inf = float("nan"), float("inf")
cases = [
    ("[1, -1, 0], 2", lambda: torch.multinomial(torch.tensor([1.0, -1, 0]), 2)),
    ("[1, inf, 0], 2", lambda: torch.multinomial(torch.tensor([1.0, inf, 0]), 2)),
    ("[1, nan, 0], 2", lambda: torch.multinomial(torch.tensor([1.0, nan, 0]), 2)),
    ("[1, -1, 0], 1, True", lambda: torch.multinomial(torch.tensor([1.0, -1, 0]), 1, True)),
    ("[0, 0, 0], 2", lambda: torch.multinomial(torch.tensor([0.0, 0, 0]), 2)),
    ("[1, -1, 0], 2, True", lambda: torch.multinomial(torch.tensor([1.0, -1, 0]), 2, True)),
    ("[1, nan, 0], 2, True", lambda: torch.multinomial(torch.tensor([1.0, nan, 0]), 2, True)),
    ("[1, inf, 0], 2, True", lambda: torch.multinomial(torch.tensor([1.0, inf, 0]), 2, True)),
    ("[0, 0, 0], 2, True", lambda: torch.multinomial(torch.tensor([0.0, 0, 0]), 2, True)),
    ("[[1, 1], [0, 0], [1, -1]], 2, True", lambda: torch.multinomial(torch.tensor([[1.0, 1], [0, 0], [1, -1]]), 2, True)),
    ("[[1, 1], [1, -1], [0, 0]], 2, True", lambda: torch.multinomial(torch.tensor([[1.0, 1], [1, -1], [0, 0]]), 2, True)),
    ("[1, 1, 1], 4", lambda: torch.multinomial(torch.tensor([1.0, 1, 1]), 4)),
    ("[1, 1, 1], 4, True", lambda: torch.multinomial(torch.tensor([1.0, 1, 1]), 4, True).shape),
    ("[1, 1, 1], 0", lambda: torch.multinomial(torch.tensor([1.0, 1, 1]), 0)),
    ("[1, 1, 1], -1, True", lambda: torch.multinomial(torch.tensor([1.0, 1, 1]), -1, True)),
    ("0-d, 1", lambda: torch.multinomial(torch.tensor(1.0), 1)),
    ("[2, 2, 2], 1", lambda: torch.multinomial(torch.ones(2, 2, 2), 1)),
    ("int64 [1, 2, 3], 1", lambda: torch.multinomial(torch.tensor([1, 2, 3]), 1)),
    ("[0, 3], 2", lambda: torch.multinomial(torch.ones(0, 3), 2).shape),
    ("[1, 0, 0], 2 (zero weights after the positive one)", lambda: torch.multinomial(torch.tensor([1.0, 0, 0]), 2)),
]
print("torch", torch.__version__)
for name, f in cases:
    try:
        print(f"{name}: ok {f()}")
    except RuntimeError as e:
        print(f"{name}: {str(e).splitlines()[0]}")
