# Records torch.amp.GradScaler("cpu") driving SGD(lr=0.1) on one float32
# parameter of 4 values (grad_scaler.json): per step the scale before, whether
# the step was skipped, the scale and growth tracker after, and the parameter.
#
# Rerun from the repository root with a venv that has torch:
#   /work/venv-torch/bin/python tests/optim/data/make_grad_scaler_fixture.py
#
# Each step sets p.grad = scale * g(i) directly (the "scaled" gradient), with
# g(i) = [(i % 7 + 1) / 8, -1/4, (i % 3 - 1) / 16, 1/2] (exact in float32,
# and so is its product with a power-of-two scale), except that bad steps put
# inf or nan into some elements. Then scaler.step(opt); scaler.update().

import json
import os
from fractions import Fraction

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
INIT = [1.0, -2.0, 0.5, 3.0]


def g(i):
    return [(i % 7 + 1) / 8, -1 / 4, (i % 3 - 1) / 16, 1 / 2]


def run(growth_interval, steps, bad, compact):
    """bad: step -> {element index: "inf" | "-inf" | "nan"}."""
    p = torch.nn.Parameter(torch.tensor(INIT, dtype=torch.float32))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16, growth_factor=2.0,
                                  backoff_factor=0.5, growth_interval=growth_interval)
    records = []
    for i in range(steps):
        scaler.scale(torch.ones(()))  # as a loss would be; also initialises the scale
        scale = scaler.get_scale()
        grad = g(i)
        for k, v in bad.get(i, {}).items():
            grad[k] = v
        p.grad = torch.tensor([scale * float(x) for x in grad], dtype=torch.float32)
        before = p.detach().clone()
        scaler.step(opt)
        skipped = sum(v.item() for v in scaler._found_inf_per_device(opt).values()) > 0
        assert skipped == (i in bad) and skipped == torch.equal(before, p.detach())
        scaler.update()
        rec = {"step": i, "grad": grad, "scale_before": scale, "skipped": skipped,
               "scale_after": scaler.get_scale(),
               "growth_tracker_after": scaler.state_dict()["_growth_tracker"],
               "param_after": [float(x) for x in p.detach()]}
        if not compact or skipped or rec["scale_after"] != scale or i == steps - 1:
            records.append(rec)
    state = scaler.state_dict()
    return {"growth_interval": growth_interval, "steps": steps, "compact": compact,
            "records": records,
            "final_param": [float(x) for x in p.detach()],
            "state_dict": {k: (v.item() if torch.is_tensor(v) else v) for k, v in state.items()}}


def sgd_model(seq):
    """The parameter as p = round_f32(p + float32(-0.1) * g) per good step,
    one rounding (what PyTorch's fused multiply-add gives), to document it."""
    p = [Fraction(x) for x in INIT]
    lr = Fraction(float(torch.tensor(-0.1, dtype=torch.float32)))
    bad = {r["step"] for r in seq["records"] if r["skipped"]}
    for i in range(seq["steps"]):
        if i not in bad:
            p = [Fraction(float(torch.tensor(float(x + lr * Fraction(y)), dtype=torch.float32)))
                 for x, y in zip(p, g(i))]
    return [float(x) for x in p]


def main():
    short_bad = {3: {1: "inf"}, 4: {0: "nan"}, 9: {2: "nan", 3: "inf"},
                 13: {0: "-inf"}, 18: {1: "inf", 2: "nan"}}
    seqs = [
        run(3, 20, short_bad, compact=False),
        run(2000, 2005, {1000: {0: "inf"}}, compact=True),
        run(2000, 2005, {}, compact=True),
    ]
    for seq in seqs:
        assert sgd_model(seq) == seq["final_param"]
    out = {
        "torch_version": torch.__version__,
        "notes": "GradScaler('cpu', init_scale=2**16, growth_factor=2, backoff_factor=0.5, "
                 "growth_interval=G); SGD(lr=0.1) on one float32 parameter initialised to "
                 "init_param. Step i: p.grad = scale_before * g(i) with g(i) = "
                 "[(i % 7 + 1) / 8, -1/4, (i % 3 - 1) / 16, 1/2], where 'grad' replaces some "
                 "elements by \"inf\", \"-inf\" or \"nan\" on bad steps (grad lists g(i) "
                 "before scaling). Then scaler.step(opt); scaler.update(). Sequences: G=3 over "
                 "20 steps, every step recorded (growth after 3 good steps, inf right after a "
                 "growth at step 3, nan at 4, so two bad in a row; bad steps 9, 13 and 18 too); "
                 "G=2000 over 2005 steps with inf at step 1000 and G=2000 over 2005 steps with "
                 "no bad step, 'compact': only steps that skip or change the scale, plus the "
                 "last step. growth_tracker_after is state_dict()['_growth_tracker']. "
                 "SGD's update p.add_(grad, alpha=-lr) rounds once per element: "
                 "p = float32(p + float32(-0.1) * g) with the product exact (a fused "
                 "multiply-add); rounding the product first differs in the G=3 sequence.",
        "init_param": INIT,
        "lr": 0.1,
        "sequences": seqs,
    }
    with open(os.path.join(HERE, "grad_scaler.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
