# Records PyTorch's float32 -> bfloat16 / float16 rounding (rounding.json) and
# its type promotion table (promotion.json), for graft's dtype tests.
#
# Rerun from the repository root with a venv that has torch and numpy:
#   /work/venv-torch/bin/python tests/runtime/data/make_dtype_fixtures.py
#
# rounding.json: for each float32 bit pattern, the bits PyTorch's CPU .to()
# gives. "bf16"/"f16" come from a contiguous 1-element tensor; "*_vec" (inside
# 1024 copies) and "*_strided" (every other element of 2048 copies, which is
# non-contiguous and takes c10's scalar conversion) are written only where
# they differ from the 1-element result. The same conversions are then redone
# in a child process with ATEN_CPU_CAPABILITY=default (no AVX/F16C kernels) and
# written as "*_default" / "*_default_strided" where they differ from "bf16"/"f16".

import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


# (what, float32 bits)
CASES = [
    ("zero", 0x00000000),
    ("negative zero", 0x80000000),
    ("normal 1.0", bits(1.0)),
    ("normal -1.0", bits(-1.0)),
    ("normal 0.1", bits(0.1)),
    ("normal 1/3", bits(1 / 3)),
    ("normal pi", bits(3.14159265)),
    ("normal -2.5 (exact in both)", bits(-2.5)),
    ("normal 1e-3", bits(1e-3)),
    ("normal 12345.678", bits(12345.678)),
    ("normal -7.77e20 (f16 overflow, bf16 fine)", bits(-7.77e20)),
    ("f32 min normal", 0x00800000),
    ("f32 smallest subnormal", 0x00000001),
    ("f32 negative smallest subnormal", 0x80000001),
    ("f32 subnormal 0x00400000", 0x00400000),
    ("f32 largest subnormal (bf16 rounds up to min normal)", 0x007FFFFF),
    ("f32 subnormal bf16 tie, even lower -> 0", 0x00008000),
    ("f32 subnormal bf16 tie, odd lower -> up", 0x00018000),
    ("f32 subnormal just above bf16 tie", 0x00008001),
    # bfloat16 keeps the top 16 bits: a tie has low half 0x8000.
    ("bf16 tie, even lower neighbour (1 + 2^-8)", 0x3F808000),
    ("bf16 tie, odd lower neighbour (1 + 3*2^-8)", 0x3F818000),
    ("bf16 just above tie", 0x3F808001),
    ("bf16 just below tie", 0x3F807FFF),
    ("bf16 just below odd tie", 0x3F817FFF),
    ("bf16 negative tie, even lower", 0xBF808000),
    ("bf16 negative tie, odd lower", 0xBF818000),
    ("bf16 tie at large exponent, odd lower", 0x7E818000),
    ("bf16 rounds up into next binade (just below 2.0)", 0x3FFFFFFF),
    ("bf16 tie below 2.0 with odd lower -> 2.0", 0x3FFF8000),
    ("bf16 max finite exactly", 0x7F7F0000),
    ("bf16 just below max-finite rounding boundary", 0x7F7F7FFF),
    ("bf16 tie at max finite (odd lower) -> inf", 0x7F7F8000),
    ("f32 max finite (bf16 -> inf)", 0x7F7FFFFF),
    ("f32 negative max finite", 0xFF7FFFFF),
    # float16 keeps 10 of 23 mantissa bits: a tie has low 13 bits 0x1000.
    ("f16 tie, even lower neighbour (1 + 2^-11)", 0x3F801000),
    ("f16 tie, odd lower neighbour (1 + 3*2^-11)", 0x3F803000),
    ("f16 just above tie", 0x3F801001),
    ("f16 just below tie", 0x3F800FFF),
    ("f16 just below odd tie", 0x3F802FFF),
    ("f16 negative tie, odd lower", 0xBF803000),
    ("f16 rounds up into next binade (just below 2.0)", 0x3FFFFFFF),
    ("f16 tie below 2.0 with odd lower -> 2.0", 0x3FFFF000),
    ("f16 just below tie below 2.0", 0x3FFFEFFF),
    ("f16 tie at 2048 + 1 (even lower)", bits(2049.0)),
    ("f16 tie at 2048 + 3 (odd lower)", bits(2051.0)),
    ("f16 max finite 65504", bits(65504.0)),
    ("f16 65519 rounds down to max finite", bits(65519.0)),
    ("f16 just below 65520", 0x477FEFFF),
    ("f16 65520 exact overflow boundary -> inf", bits(65520.0)),
    ("f16 65536 -> inf", bits(65536.0)),
    ("f16 -65520 -> -inf", bits(-65520.0)),
    ("f16 1e10 -> inf", bits(1e10)),
    ("f16 min normal 2^-14", bits(2.0**-14)),
    ("f16 largest subnormal 1023*2^-24", bits(1023 * 2.0**-24)),
    ("f16 tie between largest subnormal and min normal", bits(2.0**-14 - 2.0**-25)),
    ("f16 subnormal 2^-20", bits(2.0**-20)),
    ("f16 subnormal rounding 1e-6", bits(1e-6)),
    ("f16 subnormal tie 5*2^-25 (lower 2, even)", bits(5 * 2.0**-25)),
    ("f16 subnormal tie 3*2^-25 (lower 1, odd)", bits(3 * 2.0**-25)),
    ("f16 smallest subnormal 2^-24", bits(2.0**-24)),
    ("f16 negative smallest subnormal", bits(-(2.0**-24))),
    ("f16 tie at half smallest subnormal 2^-25 -> 0", bits(2.0**-25)),
    ("f16 just above half smallest subnormal -> 2^-24", bits(2.0**-25) + 1),
    ("f16 just below half smallest subnormal -> 0", bits(2.0**-25) - 1),
    ("f16 negative tie at half smallest subnormal -> -0", bits(-(2.0**-25))),
    ("f16 underflow 2^-26 -> 0", bits(2.0**-26)),
    ("f16 underflow 1e-10 -> 0", bits(1e-10)),
    ("f16 underflow -1e-10 -> -0", bits(-1e-10)),
    ("f16 underflow of negative f32 subnormal -> -0", 0x80400000),
    ("inf", 0x7F800000),
    ("-inf", 0xFF800000),
    ("quiet NaN (canonical)", 0x7FC00000),
    ("negative quiet NaN", 0xFFC00000),
    ("signalling NaN, payload 1 (low bit only)", 0x7F800001),
    ("signalling NaN 0x7fa00000", 0x7FA00000),
    ("signalling NaN, payload only in bf16-kept bits", 0x7F810000),
    ("signalling NaN, payload in f16-kept bit 13", 0x7F802000),
    ("negative signalling NaN", 0xFF800001),
    ("quiet NaN, payload 1", 0x7FC00001),
    ("quiet NaN, payload 0x12345", 0x7FC12345),
    ("NaN all ones", 0x7FFFFFFF),
    ("negative NaN all ones", 0xFFFFFFFF),
    ("negative quiet NaN, payload", 0xFFC0ABCD),
]


def convert(b, dtype):
    """(1-element, 1024-element, strided) uint16 results for f32 bits b."""
    one = torch.from_numpy(np.array([b], dtype=np.uint32).view(np.float32))
    many = torch.from_numpy(np.full(1024, b, dtype=np.uint32).view(np.float32))
    strided = torch.from_numpy(np.full(2048, b, dtype=np.uint32).view(np.float32))[::2]
    out = []
    for t in (one, many, strided):
        r = t.to(dtype).view(torch.int16).numpy().view(np.uint16)
        assert len(set(r.tolist())) == 1, (hex(b), dtype)
        out.append(int(r[0]))
    return out


def convert_all():
    return [[convert(b, dt) for dt in (torch.bfloat16, torch.float16)] for _, b in CASES]


def rounding():
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    child = subprocess.run([sys.executable, __file__, "--convert-all"], env=env,
                           check=True, capture_output=True, text=True)
    default = json.loads(child.stdout)
    cases = []
    for (what, b), here, there in zip(CASES, convert_all(), default):
        case = {"what": what, "f32": b}
        for key, (one, vec, strided), (d_one, _, d_strided) in zip(("bf16", "f16"), here, there):
            case[key] = one
            for suffix, v in (("_vec", vec), ("_strided", strided),
                              ("_default", d_one), ("_default_strided", d_strided)):
                if v != one:
                    case[key + suffix] = v
                    print(f"0x{b:08x} {key}: 0x{one:04x}, {key + suffix} 0x{v:04x}")
        cases.append(case)
    notes = (
        f"CPU capability here: {torch.backends.cpu.get_cpu_capability()}. Results differ "
        "only for NaN inputs; every non-NaN value rounds to nearest even the same way on "
        "every path. A contiguous 1-element tensor and a 1024-element one always agree "
        "(contiguous copies take the vectorised kernel even for one element, so no "
        "'*_vec' key appears). NaN -> bfloat16: the vectorised path (AVX512 here; "
        "ATEN_CPU_CAPABILITY=avx2 gives the same) writes 0xffff for every NaN (sign set, "
        "all payload bits set); a non-contiguous input ('*_strided', c10's scalar "
        "BFloat16 constructor) and ATEN_CPU_CAPABILITY=default ('*_default') write 0x7fc0 "
        "for every NaN, sign and payload dropped. NaN -> float16: keeps the sign, sets "
        "the quiet bit and keeps the top 10 mantissa bits (0x7f800001 -> 0x7e00, "
        "0x7fa00000 -> 0x7f00, 0x7fffffff -> 0x7fff), as F16C's vcvtps2ph does, on every "
        "path except the non-contiguous one under ATEN_CPU_CAPABILITY=default "
        "('f16_default_strided': c10's software fp16_ieee_from_fp32_value), which writes "
        "0x7e00 with the sign kept and the payload dropped."
    )
    return {"torch_version": torch.__version__, "notes": notes, "cases": cases}


DTYPES = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int32": torch.int32,
    "int64": torch.int64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
}
NAME = {v: k for k, v in DTYPES.items()}


def promotion():
    names = list(DTYPES)
    vec = {n: torch.ones(3, dtype=d) for n, d in DTYPES.items()}
    zero = {n: torch.ones((), dtype=d) for n, d in DTYPES.items()}
    tt, ts, zd = {}, {}, {}
    for a in names:
        tt[a] = {b: NAME[torch.result_type(vec[a], vec[b])] for b in names}
        zd[a] = {b: NAME[torch.result_type(vec[a], zero[b])] for b in names}
        ts[a] = {k: NAME[torch.result_type(vec[a], s)]
                 for k, s in (("True", True), ("2", 2), ("2.5", 2.5))}
    return {
        "torch_version": torch.__version__,
        "dtypes": names,
        "notes": "tensor_tensor[A][B] = result_type(1-d A, 1-d B); "
                 "tensor_scalar[A][s] = result_type(1-d A, python scalar s); "
                 "zerodim[A][B] = result_type(1-d A, 0-dim B).",
        "tensor_tensor": tt,
        "tensor_scalar": ts,
        "zerodim": zd,
    }


def write(name, obj):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--convert-all"]:
        print(json.dumps(convert_all()))
        sys.exit(0)
    write("rounding.json", rounding())
    write("promotion.json", promotion())
