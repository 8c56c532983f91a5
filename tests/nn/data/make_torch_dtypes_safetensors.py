# Writes torch_mixed_dtypes.safetensors with PyTorch's own safetensors writer
# (bfloat16, float16, uint8, int32 and float32 tensors) and
# torch_mixed_dtypes.json with each tensor's dtype, shape and exact values,
# for graft's safetensors loader tests.
#
# Rerun from the repository root with a venv that has torch and safetensors:
#   /work/venv-torch/bin/python tests/nn/data/make_torch_dtypes_safetensors.py

import json
import os

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.uint8: "uint8",
        torch.int32: "int32", torch.float32: "float32"}

torch.manual_seed(0)
tensors = {
    # randn values are not bf16/f16-representable: the file holds them rounded.
    "w_bf16": torch.randn(3, 4).to(torch.bfloat16),
    "w_f16": torch.randn(2, 3).to(torch.float16),
    "u8": torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8),
    "i32": torch.tensor([[-1, 2**31 - 1], [-(2**31), 7]], dtype=torch.int32),
    "f32": torch.tensor([0.1, -3.5], dtype=torch.float32),
}
path = os.path.join(HERE, "torch_mixed_dtypes.safetensors")
save_file(tensors, path, metadata={"torch_version": torch.__version__})

back = load_file(path)
out = {"torch_version": torch.__version__, "tensors": {}}
for k, t in tensors.items():
    assert torch.equal(back[k], t) and back[k].dtype == t.dtype
    # float() of a bf16/f16/f32 value is exact in a double, so is the JSON number.
    values = t.double().flatten().tolist() if t.is_floating_point() else t.flatten().tolist()
    out["tensors"][k] = {"dtype": NAME[t.dtype], "shape": list(t.shape), "values": values}
with open(os.path.join(HERE, "torch_mixed_dtypes.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
