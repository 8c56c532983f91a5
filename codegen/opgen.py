#!/usr/bin/env python3
"""opgen: expands graft's op declarations (codegen/ops/*.yaml) into each layer's part.

One declaration per op holds everything that used to be a hand-kept parallel list: the schema
(name, arguments, defaults, aliasing), the API variants (graft:: function, Tensor method), the
kernels (hand-written ones by name, or elementwise ones generated from a math functor), the
derivative of each input, and the test cases. Every layer runs this script for its own part only
(`--layer`), so a layer's generated code can never include a layer below it:

  runtime   runtime/op_options.h (option enums), runtime/tensor_methods.h (Tensor's op methods)
  ops       ops/ops_generated.h and .cpp (the dispatched ops:: API, the schemas),
            ops/cpu_kernels.h (CPU kernel prototypes), ops/cpu_registration.cpp (registrations and
            the generated elementwise CPU kernels)
  cuda      cuda/cuda_kernels.h, cuda/cuda_registration.cpp, cuda/elementwise_table.cu
  autograd  autograd/functional_generated.h and .cpp (graft::, the Saved structs and derivative
            rules), autograd/tensor_methods_generated.cpp
  tests     op_cases.cpp (gradcheck, gradgradcheck, ops::/graft:: agreement, coverage) and
            op_cases_cuda.cpp (CPU vs CUDA per declared case)

The declaration format is a small subset of YAML (read by this script; no PyYAML needed): a list
of entries, each `- key: value` then indented `key: value` lines; a value runs to the end of its
line (an indented line that does not start with `key:` continues it); `#` starts a comment at the
start of a line. A key may repeat where the format says so (`check`). See codegen/README.md.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field

# ----------------------------------------------------------------------------------------------
# Reading declarations


class DeclError(Exception):
    pass


def read_entries(path: str) -> list[dict]:
    """Parses the YAML subset: [(key, value, line)] per entry; repeated keys keep every value."""
    entries: list[dict] = []
    cur = None
    last_key = None
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            where = f"{os.path.basename(path)}:{lineno}"
            m = re.match(r"^(-\s+|\s+)([A-Za-z_][A-Za-z0-9_, ]*):(\s+(.*))?$", line)
            if line.startswith("-"):
                if not m:
                    raise DeclError(f"{where}: expected '- key: value'")
                cur = {"__where__": where, "__items__": []}
                entries.append(cur)
            if m and (line.startswith("-") or (cur is not None and not is_continuation(line, m))):
                key, value = m.group(2).strip(), (m.group(4) or "").strip()
                cur["__items__"].append((key, value, where))
                last_key = key
            elif cur is not None and line.startswith(" "):
                if last_key is None:
                    raise DeclError(f"{where}: continuation line with no key before it")
                k, v, w = cur["__items__"][-1]
                cur["__items__"][-1] = (k, (v + " " + stripped).strip(), w)
            else:
                raise DeclError(f"{where}: cannot parse '{line}'")
    return entries


def is_continuation(line: str, m) -> bool:
    # "    x = real(3, 4)" would match the key pattern only without a colon; a line whose key part
    # contains spaces but is not a formula list ("self, other") is a continuation.
    key = m.group(2)
    return " " in key.strip() and "," not in key


# ----------------------------------------------------------------------------------------------
# Schemas


@dataclass
class Arg:
    type: str           # "Tensor", "Tensor?", "Tensor[]", "Scalar", "int[]", "GeluApproximate", ...
    name: str
    default: str | None
    alias: str = ""
    write: bool = False

    @property
    def base(self) -> str:
        return self.type.rstrip("?")

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def is_tensor(self) -> bool:
        return self.type in ("Tensor", "Tensor?")

    @property
    def is_tensor_list(self) -> bool:
        return self.type == "Tensor[]"


@dataclass
class Ret:
    type: str
    alias: str = ""
    write: bool = False
    name: str = ""


def split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for c in s:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_type(t: str) -> tuple[str, str, bool]:
    alias, write = "", False
    m = re.match(r"^([A-Za-z_]+)\(([a-z])(!?)\)(.*)$", t)
    if m:
        alias, write = m.group(2), m.group(3) == "!"
        t = m.group(1) + m.group(4)
    return t, alias, write


def parse_schema(text: str, where: str):
    m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(\.([A-Za-z0-9_]+))?\((.*)\)\s*->\s*(.*)$", text)
    if not m:
        raise DeclError(f"{where}: cannot parse schema '{text}'")
    name, overload, args_s, rets_s = m.group(1), m.group(3) or "", m.group(4), m.group(5).strip()
    args = []
    for a in split_top(args_s):
        if a == "*":
            continue  # keyword-only marker: C++ has none
        default = None
        if "=" in a:
            a, default = a.split("=", 1)
            a, default = a.strip(), default.strip()
        parts = a.rsplit(" ", 1)
        if len(parts) != 2:
            raise DeclError(f"{where}: argument '{a}' has no name")
        t, alias, write = parse_type(parts[0].strip())
        args.append(Arg(t, parts[1].strip(), default, alias, write))
    rets = []
    if rets_s.startswith("(") and rets_s.endswith(")"):
        rets_s = rets_s[1:-1].strip()
    if rets_s:
        for r in split_top(rets_s):
            parts = r.split(" ")
            t, alias, write = parse_type(parts[0])
            rets.append(Ret(t, alias, write, parts[1] if len(parts) > 1 else ""))
    return name, overload, args, rets


# ----------------------------------------------------------------------------------------------
# The op model


@dataclass
class Check:
    expr: str
    inputs: list[tuple[str, str]]  # (name, generator expression)
    options: set[str]
    where: str


@dataclass
class Op:
    name: str
    overload: str
    args: list[Arg]
    rets: list[Ret]
    schema: str
    where: str
    family: str
    variants: set[str] = field(default_factory=lambda: {"function"})
    kernel: str = ""            # stem of hand-written kernels; "any NAME": one function for every device
    shared: str = ""            # the kernel is a shared template over a device's part ({dev}, {Dev}, {args})
    cuda: str | None = None     # why there is no CUDA kernel (None: there is one)
    cross_device: bool = False
    node: str = ""              # backward node name
    formulas: list[tuple[list[str], str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    nondiff: str | None = None  # why it records no gradient
    composite: str | None = None  # graft:: is written by hand (what it composes)
    view: bool = False
    output_diff: list[bool] | None = None
    once: str | None = None     # why it is not twice differentiable
    elementwise: str = ""       # math functor: the kernels are generated
    dtype_rule: str = ""
    out_dtype: str = ""         # "bool": elementwise output dtype
    cpu_fast_path: bool = False
    reduced: str = ""           # "native": its kernels take bfloat16/float16 themselves (no float fallback); "native cpu" / "native cuda": only that device's
    api: str = ""               # "ops": no graft:: form
    registered: bool = True     # false (`dispatch: none`): a composite that is not a dispatched op
    save_after: set[str] = field(default_factory=set)
    # saved tensor -> "lossy" / "sign": what a compressing pack hook may do to it (`compress:`);
    # every other saved tensor is exact (autograd/saved_variable.h, SaveTolerance)
    compress: dict = field(default_factory=dict)
    autocast: dict = field(default_factory=dict)  # device ("cpu"/"cuda") -> "lower" / "fp32" / "promote"

    @property
    def full_name(self) -> str:
        return self.name + ("." + self.overload if self.overload else "")

    @property
    def stem(self) -> str:
        """The name a hand-written kernel goes by, before _cpu/_cuda: `kernel:`, else the op's name
        without leading/trailing underscores, plus the overload (`max.dim` -> max_dim, `fill_` -> fill)."""
        if self.elementwise:  # generated, file-local: unique is all that matters
            return self.full_name.replace(".", "_") + "_ew"
        if self.kernel and not self.kernel.startswith("any "):
            return self.kernel
        return self.name.strip("_") + ("_" + self.overload if self.overload else "")

    @property
    def inplace(self) -> bool:
        return any(a.write for a in self.args)

    @property
    def differentiable(self) -> bool:
        return bool(self.formulas)

    @property
    def tensor_args(self) -> list[Arg]:
        return [a for a in self.args if a.is_tensor or a.is_tensor_list]

    @property
    def node_name(self) -> str:
        if self.node:
            return self.node
        base = self.name.rstrip("_")
        return "".join(p.capitalize() for p in base.split("_") if p) + "Backward"


@dataclass
class Enum:
    name: str
    arg: str
    values: list[str]
    where: str


def pascal(s: str) -> str:
    return "".join(p.capitalize() for p in s.split("_"))


def build_model(paths: list[str]):
    ops: list[Op] = []
    enums: list[Enum] = []
    for path in paths:
        family = os.path.splitext(os.path.basename(path))[0]
        for e in read_entries(path):
            items = e["__items__"]
            first_key = items[0][0]
            if first_key == "enum":
                kv = {k: v for k, v, _ in items}
                enums.append(Enum(kv["enum"], kv.get("arg", ""), [v.strip() for v in kv["values"].split(",")],
                                  e["__where__"]))
                continue
            if first_key != "func":
                raise DeclError(f"{e['__where__']}: an entry starts with 'func:' or 'enum:'")
            ops.append(make_op(items, e["__where__"], family))
    check_model(ops, enums)
    return ops, enums


def make_op(items, where, family) -> Op:
    schema = items[0][1]
    name, overload, args, rets = parse_schema(schema, where)
    op = Op(name, overload, args, rets, schema, where, family)
    argnames = {a.name for a in args}
    for key, value, w in items[1:]:
        if key == "variants":
            op.variants = {v.strip() for v in value.split(",") if v.strip()}
        elif key == "kernel":
            op.kernel = value
        elif key == "shared":
            if "{args}" not in value:
                raise DeclError(f"{w}: 'shared:' is a call with {{args}} where the op's arguments go")
            op.shared = value
        elif key == "cuda":
            op.cuda = value
        elif key == "cross_device":
            op.cross_device = value == "true"
        elif key == "node":
            op.node = value
        elif key == "check":
            op.checks.append(parse_check(value, w))
        elif key == "nondifferentiable":
            op.nondiff = value
        elif key == "composite":
            op.composite = value
        elif key == "view":
            op.view = value == "true"
        elif key == "output_differentiability":
            op.output_diff = [v.strip() == "true" for v in value.split(",")]
        elif key == "once_differentiable":
            op.once = value
        elif key == "elementwise":
            op.elementwise = value
        elif key == "dtype":
            op.dtype_rule = value
        elif key == "out":
            op.out_dtype = value
        elif key == "cpu_fast_path":
            op.cpu_fast_path = value == "true"
        elif key == "reduced":
            if value not in ("native", "native cpu", "native cuda"):
                raise DeclError(f"{w}: 'reduced:' takes 'native' (every device), 'native cpu' or 'native cuda'")
            op.reduced = value
        elif key == "api":
            op.api = value
        elif key == "dispatch":
            if value != "none":
                raise DeclError(f"{w}: 'dispatch:' takes only 'none' (a composite that is not an op)")
            op.registered = False
        elif key == "save_after":
            op.save_after = {v.strip() for v in value.split(",")}
        elif key == "autocast":
            op.autocast = parse_autocast(value, w)
        elif key == "compress":
            for item in (v.strip() for v in value.split(",") if v.strip()):
                name, _, kind = item.partition("=")
                kind = kind.strip() or "lossy"
                if kind not in ("lossy", "sign"):
                    raise DeclError(f"{w}: 'compress:' lists saved tensors as NAME (lossy) or NAME=sign, got '{item}'")
                op.compress[name.strip()] = kind
        else:
            names = [k.strip() for k in key.split(",")]
            for n in names:
                if n not in argnames:
                    raise DeclError(f"{w}: '{key}' is neither an option nor an argument of {op.full_name}")
            op.formulas.append((names, value))
    return op


AUTOCAST_POLICIES = {"lower": "Lower", "fp32": "Fp32", "promote": "Promote"}
AUTOCAST_DEVICES = ("cpu", "cuda")


def parse_autocast(value: str, where: str) -> dict:
    """`lower` (every device), `fp32 cuda` (one device), `fp32 cpu, promote cuda` -> {device: policy}."""
    out = {}
    for item in value.split(","):
        words = item.split()
        if not words or len(words) > 2 or words[0] not in AUTOCAST_POLICIES or \
                (len(words) == 2 and words[1] not in AUTOCAST_DEVICES):
            raise DeclError(f"{where}: 'autocast:' takes 'POLICY [DEVICE]' items separated by commas, POLICY one of "
                            f"{', '.join(AUTOCAST_POLICIES)} and DEVICE one of {', '.join(AUTOCAST_DEVICES)}; "
                            f"got '{item.strip()}'")
        for d in (words[1:] or AUTOCAST_DEVICES):
            if d in out:
                raise DeclError(f"{where}: 'autocast:' gives {d} two policies")
            out[d] = words[0]
    return out


def parse_check(value: str, where: str) -> Check:
    parts = [p.strip() for p in value.split(";")]
    expr, inputs, options = parts[0], [], set()
    for p in parts[1:]:
        if not p:
            continue
        if "=" in p and re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", p):
            n, g = p.split("=", 1)
            inputs.append((n.strip(), g.strip()))
        else:
            options.add(p)
    return Check(expr, inputs, options, where)


def check_model(ops: list[Op], enums: list[Enum]):
    seen = {}
    for op in ops:
        if op.full_name in seen:
            raise DeclError(f"{op.where}: {op.full_name} is declared twice (first at {seen[op.full_name]})")
        seen[op.full_name] = op.where
        if op.formulas and op.nondiff:
            raise DeclError(f"{op.where}: {op.full_name} has derivatives and is marked nondifferentiable")
        if not op.formulas and not op.nondiff and not op.composite:
            raise DeclError(f"{op.where}: {op.full_name} needs a derivative, 'nondifferentiable: why' or "
                            "'composite: what'")
        if (op.formulas or (op.composite and not op.nondiff)) and not op.checks:
            raise DeclError(f"{op.where}: {op.full_name} is differentiable but has no 'check:' case")
        if not op.registered and not op.composite:
            raise DeclError(f"{op.where}: {op.full_name}: only a composite can be 'dispatch: none'")
        if op.compress and not op.formulas:
            raise DeclError(f"{op.where}: {op.full_name} has 'compress:' but no derivative that saves anything")
        if op.elementwise and not op.dtype_rule:
            raise DeclError(f"{op.where}: elementwise op {op.full_name} needs 'dtype:' (its plan's rule)")
        if op.autocast:
            if op.api == "ops" or not ({"function", "method"} & op.variants):
                raise DeclError(f"{op.where}: {op.full_name} has an 'autocast:' policy but no graft:: function "
                                "to apply it in")
            if op.inplace or op.view or not op.tensor_args:
                raise DeclError(f"{op.where}: {op.full_name}: autocast casts the tensor inputs of out-of-place "
                                "ops only (PyTorch's lists have no in-place or view op)")
    names = {e.name for e in enums}
    for op in ops:
        for a in op.args:
            if a.base[0].isupper() and a.base not in KNOWN_TYPES and a.base not in names and not a.is_tensor_list:
                raise DeclError(f"{op.where}: unknown argument type '{a.type}' in {op.full_name}")


KNOWN_TYPES = {"Tensor", "Scalar", "ScalarType", "Device", "MemoryFormat"}

# ----------------------------------------------------------------------------------------------
# C++ types


class Types:
    def __init__(self, enums: list[Enum]):
        self.enums = {e.name: e for e in enums}

    def is_enum(self, t: str) -> bool:
        return t in self.enums

    def api(self, a: Arg) -> str:
        """The parameter type of ops::, graft:: and Tensor methods."""
        b = a.base
        if a.is_tensor:
            return "Tensor&" if a.write else "const Tensor&"
        if a.is_tensor_list:
            return "const std::vector<Tensor>&"
        if b in self.enums:
            return f"Option<{b}>"
        return self.value(a)

    def kernel(self, a: Arg) -> str:
        """The parameter type of a kernel (what the dispatcher unboxes)."""
        if a.is_tensor:
            return "const Tensor&"
        if a.base in self.enums:
            return a.base
        return self.api(a)

    def value(self, a: Arg) -> str:
        b = {"Scalar": "Scalar", "int": "int64_t", "float": "double", "bool": "bool", "ScalarType": "DType",
             "Device": "Device", "MemoryFormat": "MemoryFormat", "str": "std::string"}
        if a.base == "int[]":
            return "std::optional<Shape>" if a.optional else "const Shape&"
        if a.base in self.enums:
            return a.base
        t = b.get(a.base)
        if t is None:
            raise DeclError(f"no C++ type for '{a.type}'")
        if t == "std::string":
            return "const std::string&"
        return f"std::optional<{t}>" if a.optional else t

    def saved(self, a: Arg) -> str:
        """The type a Saved struct keeps a non-tensor argument in."""
        t = self.kernel(a)
        t = t.replace("const ", "").replace("&", "")
        return t

    def default(self, a: Arg) -> str:
        d = a.default
        if d is None:
            return ""
        if d == "None":
            return "{}" if (a.is_tensor or a.is_tensor_list) else "std::nullopt"
        if d in ("True", "False"):
            return d.lower()
        if a.base in self.enums:
            return f"{a.base}::{pascal(d)}"
        if a.base == "MemoryFormat":
            return f"MemoryFormat::{pascal(d)}"
        if a.base == "ScalarType":
            return "k" + pascal(d)
        if a.base == "Device":
            return f"Device(DeviceType::{d.upper()})"
        if d.startswith("["):
            return "{" + d[1:-1] + "}"
        return d

    def ret(self, op: Op) -> str:
        if not op.rets:
            return "void"
        if len(op.rets) == 1 and op.rets[0].type == "Tensor":
            if op.rets[0].write:
                return "Tensor&"
            return "Tensor"
        return "std::vector<Tensor>"

    def kernel_ret(self, op: Op) -> str:
        r = self.ret(op)
        return "Tensor" if r == "Tensor&" else r


def params(op: Op, types: Types, kind: str, defaults: bool, skip_self: bool = False) -> str:
    out = []
    for i, a in enumerate(op.args):
        if skip_self and i == 0:
            continue
        t = types.api(a) if kind == "api" else types.kernel(a)
        s = f"{t} {a.name}"
        if defaults and a.default is not None:
            s += " = " + types.default(a)
        out.append(s)
    return ", ".join(out)


def arg_names(op: Op, skip_self: bool = False) -> str:
    return ", ".join(a.name for i, a in enumerate(op.args) if not (skip_self and i == 0))


def schema_text(op: Op) -> str:
    """The schema as registered: defaults and the keyword marker dropped (C++ has the defaults)."""
    args = []
    for a in op.args:
        t = a.base
        if a.alias:
            t = f"{t}({a.alias}{'!' if a.write else ''})"
        if a.optional:
            t += "?"
        args.append(f"{t} {a.name}")
    rets = []
    for r in op.rets:
        t = r.type
        if r.alias:
            suffix = "!" if r.write else ""
            t = t.replace("Tensor", f"Tensor({r.alias}{suffix})", 1)
        rets.append(t)
    rs = rets[0] if len(rets) == 1 else "(" + ", ".join(rets) + ")"
    if not rets:
        rs = "()"
    return f"{op.full_name}({', '.join(args)}) -> {rs}"


def cpp_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


HEADER = "// Generated by codegen/opgen.py from codegen/ops/*.yaml. Do not edit: edit the declarations.\n"

# ----------------------------------------------------------------------------------------------
# runtime: option enums and Tensor methods


def gen_op_options(enums: list[Enum]) -> str:
    out = [HEADER, "#pragma once\n",
           "// Option arguments of ops (gelu's approximate, a loss's reduction): plain enums, so kernels on",
           "// every device (nvcc included) take the value the API parsed once. The names are PyTorch's.",
           "#include <array>\n#include <cstdint>\n#include <string_view>\n",
           "namespace graft {\n",
           "template <class E> struct OptionTraits;\n"]
    for e in enums:
        vals = ", ".join(pascal(v) for v in e.values)
        names = ", ".join(f'"{v}"' for v in e.values)
        out.append(f"enum class {e.name} : int8_t {{ {vals} }};")
        out.append(f"template <> struct OptionTraits<{e.name}> {{")
        out.append(f'  static constexpr std::string_view arg = "{e.arg}";')
        out.append(f"  static constexpr std::array<std::string_view, {len(e.values)}> names{{{names}}};")
        out.append("};\n")
    out.append("}  // namespace graft")
    return "\n".join(out) + "\n"


def method_ops(ops: list[Op]) -> list[Op]:
    return [op for op in ops if "method" in op.variants]


def gen_tensor_methods_h(ops: list[Op], types: Types) -> str:
    out = [HEADER, "// Included inside class Tensor (runtime/tensor.h): one method per op declared with the",
           "// `method` variant; defined in autograd/tensor_methods_generated.cpp as graft::op(*this, ...)."]
    for op in method_ops(ops):
        ret = types.ret(op)
        const = "" if op.inplace else " const"
        out.append(f"{ret} {op.name}({params(op, types, 'api', True, skip_self=True)}){const};")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# ops: the dispatched API, schemas, kernel prototypes and registration


def dispatched(ops: list[Op]) -> list[Op]:
    return [op for op in ops if op.registered]


def gen_ops_h(ops: list[Op], types: Types) -> str:
    out = [HEADER, "// Included by ops/ops.h inside namespace graft::ops: one dispatched function per declared op."]
    fam = None
    for op in dispatched(ops):
        if op.family != fam:
            fam = op.family
            out.append(f"\n// ---- {fam} ----")
        out.append(f"{types.ret(op)} {op.name}({params(op, types, 'api', True)});")
    return "\n".join(out) + "\n"


def box_expr(a: Arg, op: Op, types: Types) -> str:
    if a.base in types.enums:
        return f"{a.name}.value({cpp_str(op.name)})"
    return a.name


def gen_ops_cpp(ops: list[Op], types: Types) -> str:
    out = [HEADER, '#include "ops/ops.h"', '#include "runtime/dispatcher.h"', "",
           "namespace graft {", "", "// The schemas, registered once at load."]
    for op in dispatched(ops):
        cross = ", /*cross_device=*/true" if op.cross_device else ""
        out.append(f"GRAFT_DEFINE_OP({cpp_str(schema_text(op))}{cross});")
    out.append("\nnamespace ops {\n")
    for op in dispatched(ops):
        ret = types.ret(op)
        out.append(f"{ret} {op.name}({params(op, types, 'api', False)}) {{")
        out.append(f"  GRAFT_OP_HANDLE(op, {cpp_str(op.full_name)});")
        call = f"call_op(op{''.join(', ' + box_expr(a, op, types) for a in op.args)})"
        if ret == "void":
            out.append(f"  {call};")
        elif ret == "Tensor&":
            out.append(f"  {call};")
            out.append(f"  return {op.args[0].name};")
        elif ret == "Tensor":
            out.append(f"  return {call}[0];")
        else:
            out.append(f"  return {call};")
        out.append("}")
    out.append("\n}  // namespace ops\n}  // namespace graft")
    return "\n".join(out) + "\n"


def has_device_kernel(op: Op, device: str) -> bool:
    if not op.registered:
        return False
    if device == "cuda":
        # An "any" kernel is registered for every device by the ops layer, so a build without
        # the CUDA backend (or a fake CUDA device in the tests) still has views and splits.
        return op.cuda is None and not op.kernel.startswith("any ")
    return True


def needs_reduced_fallback(op: Op, device: str) -> bool:
    """Whether the op's kernel on `device` is registered behind the float fallback."""
    if not has_device_kernel(op, device) or op.elementwise or op.kernel.startswith("any "):
        return False
    return not (op.reduced == "native" or op.reduced == f"native {device}")


def kernel_fn(op: Op, device: str) -> str:
    if op.kernel.startswith("any "):
        return op.kernel[4:].strip()
    return f"{op.stem}_{device}"


def gen_kernels_h(ops: list[Op], types: Types, device: str) -> str:
    ns = "kernels" if device == "cpu" else "cuda"
    guard = "ops/ops.h" if device == "cpu" else "ops/ops.h"
    out = [HEADER, "#pragma once",
           f"// Prototypes of every {device.upper()} kernel the declarations name: a hand-written kernel",
           "// with another signature fails to compile instead of failing to dispatch.",
           f'#include "{guard}"', "", f"namespace graft::{ns} {{"]
    anys = set()
    for op in dispatched(ops):
        if not has_device_kernel(op, device) or op.elementwise or op.shared:
            continue
        fn = kernel_fn(op, device)
        if op.kernel.startswith("any "):
            if fn in anys:
                continue
            anys.add(fn)
            out.append(f"// {op.full_name} (every device)")
            out.append(f"}}  // namespace graft::{ns}\nnamespace graft::kernels {{")
            out.append(f"{types.kernel_ret(op)} {fn}({params(op, types, 'kernel', False)});")
            out.append(f"}}  // namespace graft::kernels\nnamespace graft::{ns} {{")
            continue
        out.append(f"{types.kernel_ret(op)} {fn}({params(op, types, 'kernel', False)});")
    out.append(f"}}  // namespace graft::{ns}")
    return "\n".join(out) + "\n"


def scalar_arg_expr(a: Arg, types: Types) -> str:
    if a.base in types.enums:
        return f"enum_arg({a.name})"
    return f"scalar_arg({a.name})"


def elementwise_pieces(op: Op, types: Types):
    tins = [a for a in op.args if a.is_tensor]
    params_ = [a for a in op.args if not a.is_tensor]
    rule_args = ", ".join([cpp_str(op.name)] + [a.name for a in op.args])
    sargs = ", ".join(scalar_arg_expr(a, types) for a in params_)
    return tins, params_, rule_args, sargs


def gen_registration(ops: list[Op], types: Types, device: str) -> str:
    DEV = device.upper()
    if device == "cpu":
        inc = ['#include "ops/cpu_kernels.h"', '#include "ops/cpu_parts.h"', '#include "ops/elementwise_cpu.h"',
               '#include "ops/reduced_precision_fallback.h"']
        ns = "kernels"
    else:
        inc = ['#include "cuda/cuda_context.h"', '#include "cuda/cuda_kernels.h"', '#include "cuda/cuda_parts.h"',
               '#include "cuda/elementwise_cuda.h"',
               '#include "cuda/elementwise_table.h"', '#include "ops/elementwise_plan.h"', '#include "ops/binary_plan.h"',
               '#include "ops/math/elementwise_math.h"', '#include "ops/reduced_precision_fallback.h"',
               '#include "ops/scalar_arg.h"', '#include "ops/unary_plan.h"']
        ns = "cuda"
    out = [HEADER, f"// The {DEV} kernels of every declared op, registered with the dispatcher; the elementwise",
           "// ops' kernels themselves (the plan's dtype rule, then the shared loop over their math functor).",
           *inc, '#include "runtime/dispatcher.h"', "", f"namespace graft::{ns} {{", "namespace {", ""]
    if device == "cuda":
        out += ["using kernels::enum_arg;", "using kernels::scalar_arg;", ""]
    for op in dispatched(ops):
        if not op.elementwise or not has_device_kernel(op, device):
            continue
        tins, params_, rule_args, sargs = elementwise_pieces(op, types)
        kparams = params(op, types, "kernel", False)
        out.append(f"{types.kernel_ret(op)} {op.stem}_{device}({kparams}) {{")
        if device == "cpu" and op.cpu_fast_path:
            # An in-place op's fast path writes self (run_inplace); the others return a new tensor.
            run_fast = "run_inplace" if op.inplace else "run"
            out.append(f"  if (Tensor y = CpuFastPath<math::{op.elementwise}>::{run_fast}({arg_names(op)}); y.defined()) return y;")
        if device == "cuda":
            out.append(f"  DeviceGuard guard({tins[0].name}.device().index);")
        out.append(f"  const DType r = kernels::{op.dtype_rule}({rule_args});")
        inputs = ", ".join(a.name for a in tins)
        if device == "cpu":
            run = f"[&](TensorIterator& it) {{ elementwise_loop_cpu<math::{op.elementwise}>(it, r, {{{sargs}}}); }}"
        else:
            run = f"[&](kernels::TensorIterator& it) {{ launch_{op.stem}(r, geometry_of(it), {{{sargs}}}, current_stream()); }}"
        if op.inplace:
            out.append(f"  return kernels::elementwise_op_<math::{op.elementwise}>({cpp_str(op.name)}, {op.args[0].name}, r, {{{inputs}}}, {run});")
        else:
            out.append(f"  return kernels::elementwise_op<math::{op.elementwise}>({cpp_str(op.name)}, r, {{{inputs}}}, {run});")
        out.append("}")
    # Kernels the family's plan shares across devices: one template, instantiated with this
    # device's part (its matmul core, its max-pool loop), so no device file repeats the wrapper.
    for op in dispatched(ops):
        if not op.shared or not has_device_kernel(op, device):
            continue
        call = op.shared.format(dev=device, Dev=device.capitalize(), args=arg_names(op))
        out.append(f"{types.kernel_ret(op)} {op.stem}_{device}({params(op, types, 'kernel', False)}) {{ return {call}; }}")
    # Kernels without a native 16-bit path run behind the float fallback
    # (ops/reduced_precision_fallback.h): bfloat16/float16 arguments computed in float32.
    for op in dispatched(ops):
        if needs_reduced_fallback(op, device):
            fn = kernel_fn(op, device)
            out.append(f"OpResult {op.stem}_{device}_reduced(Stack& s) {{")
            out.append(f"  GRAFT_OP_HANDLE(op, {cpp_str(op.full_name)});")
            out.append(f"  return kernels::reduced_precision_fallback(op, s, &boxed<&{fn}>);")
            out.append("}")
    out.append("\n}  // namespace\n")
    for op in dispatched(ops):
        if not has_device_kernel(op, device):
            continue
        fn = kernel_fn(op, device) if not op.elementwise else f"{op.stem}_{device}"
        if op.kernel.startswith("any "):
            for dev in ("CPU", "CUDA"):  # every DeviceType: metadata-only or device-generic
                out.append(f"GRAFT_KERNEL({cpp_str(op.full_name)}, {dev}, ::graft::kernels::{fn});")
            continue
        if needs_reduced_fallback(op, device):
            out.append(f"static ::graft::KernelRegistrar {op.stem}_{device}_registrar({cpp_str(op.full_name)}, "
                       f"DeviceType::{DEV}, &{op.stem}_{device}_reduced);")
            continue
        out.append(f"GRAFT_KERNEL({cpp_str(op.full_name)}, {DEV}, {fn});")
    out.append(f"\n}}  // namespace graft::{ns}")
    return "\n".join(out) + "\n"


def gen_cuda_table_h(ops: list[Op]) -> str:
    out = [HEADER, "#pragma once",
           "// Launchers of the generated elementwise kernels (cuda/elementwise_table.cu, nvcc): one per",
           "// elementwise op, over the glue's geometry, with the op's non-tensor arguments as ScalarArgs.",
           '#include <cuda_runtime_api.h>\n', '#include <initializer_list>\n', '#include "cuda/kernels/elementwise.h"', "",
           "namespace graft::cuda {"]
    for op in dispatched(ops):
        if op.elementwise and has_device_kernel(op, "cuda"):
            out.append(f"void launch_{op.stem}(DType r, const ElementwiseGeometry& g, std::initializer_list<ScalarArg> p, "
                       "cudaStream_t stream);")
    out.append("}  // namespace graft::cuda")
    return "\n".join(out) + "\n"


def gen_cuda_table_cu(ops: list[Op]) -> str:
    out = [HEADER, '#include "cuda/elementwise_table.h"', "",
           '#include "cuda/kernels/elementwise.cuh"', "", "namespace graft::cuda {", ""]
    for op in dispatched(ops):
        if not (op.elementwise and has_device_kernel(op, "cuda")):
            continue
        out.append(f"void launch_{op.stem}(DType r, const ElementwiseGeometry& g, std::initializer_list<ScalarArg> p, "
                   "cudaStream_t stream) {")
        out.append(f"  launch_math<math::{op.elementwise}>(r, g, p.begin(), stream, {cpp_str(op.name)});")
        out.append("}")
    out.append("\n}  // namespace graft::cuda")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# autograd: graft::, Saved structs and rules

IDENT = re.compile(r"(?<![\w.:>])([A-Za-z_][A-Za-z0-9_]*)")


def idents(expr: str) -> set[str]:
    # identifiers not preceded by '.', '::' or '->' (member and qualified names are not ours)
    stripped = re.sub(r'"([^"\\]|\\.)*"', '""', expr)
    return set(IDENT.findall(stripped))


def public_ops(ops: list[Op]) -> list[Op]:
    return [op for op in ops if op.api != "ops"]


def gen_functional_h(ops: list[Op], types: Types) -> str:
    out = [HEADER, "// Included by autograd/functional.h inside namespace graft: the public functions of every",
           "// declared op (differentiable where the declaration has a derivative; composite ones are",
           "// written by hand in autograd/, with exactly this signature)."]
    fam = None
    for op in public_ops(ops):
        if "function" not in op.variants and "method" not in op.variants:
            continue
        if op.family != fam:
            fam = op.family
            out.append(f"\n// ---- {fam} ----")
        out.append(f"{types.ret(op)} {op.name}({params(op, types, 'api', True)});")
    return "\n".join(out) + "\n"


@dataclass
class RulePlan:
    saved_tensors: dict  # name -> (is_output, set of input indices using it, expr at record time)
    saved_values: dict   # name -> C++ type
    forward_values: dict  # name -> (type, expr)


def result_names(op: Op) -> list[str]:
    if len(op.rets) == 1:
        return ["result"]
    return [f"result{i}" for i in range(len(op.rets))]


def plan_rule(op: Op, types: Types) -> RulePlan:
    tensor_idx = {a.name: i for i, a in enumerate(op.tensor_args)}
    values = {a.name: a for a in op.args if not (a.is_tensor or a.is_tensor_list)}
    plan = RulePlan({}, {}, {})
    rnames = result_names(op)
    for names, formula in op.formulas:
        users = {tensor_idx[n] for n in names if n in tensor_idx}
        for ident in idents(formula):
            if ident in tensor_idx and not op.args[[a.name for a in op.args].index(ident)].is_tensor_list:
                plan.saved_tensors.setdefault(ident, [False, set()])[1].update(users)
            elif ident in rnames:
                plan.saved_tensors.setdefault(ident, [True, set()])[1].update(users)
            elif ident in values:
                plan.saved_values[ident] = types.saved(values[ident])
            else:
                m = re.match(r"^(\w+)_(strides|offset)$", ident)
                if m and m.group(1) in tensor_idx:
                    t = "Shape" if m.group(2) == "strides" else "int64_t"
                    src = m.group(1)
                    e = f"{src}.strides()" if m.group(2) == "strides" else f"{src}.storage_offset()"
                    plan.forward_values[ident] = (t, e)
    # Saved in argument order, then the results: the order pack hooks see them in (as PyTorch).
    order = [a.name for a in op.args] + rnames
    plan.saved_tensors = dict(sorted(plan.saved_tensors.items(), key=lambda kv: order.index(kv[0])))
    return plan


def saved_struct_name(op: Op) -> str:
    return pascal(op.full_name.replace(".", "_").rstrip("_")) + ("Inplace" if op.inplace else "") + "Saved"


def rule_name(op: Op) -> str:
    return "d_" + op.full_name.replace(".", "_")


def gen_rule(op: Op, types: Types, plan: RulePlan) -> list[str]:
    tensor_args = op.tensor_args
    tensor_idx = {a.name: i for i, a in enumerate(tensor_args)}
    sname = saved_struct_name(op)
    out = [f"struct {sname} {{"]
    for n, t in plan.saved_values.items():
        out.append(f"  {t} {n}{{}};")
    for n, (t, _) in plan.forward_values.items():
        out.append(f"  {t} {n}{{}};")
    if plan.saved_tensors:
        out.append("  SavedVariable " + ", ".join(plan.saved_tensors) + ";")
    out.append("};")
    rn = rule_name(op)
    out.append(f"variable_list {rn}([[maybe_unused]] OpNode& n, [[maybe_unused]] {sname}& s, "
               "[[maybe_unused]] const variable_list& grads) {")
    out.append("  [[maybe_unused]] const Tensor& grad = grads[0];")
    list_arg = next((a for a in op.args if a.is_tensor_list), None)
    nin = "n.inputs.size()" if list_arg else str(len(tensor_args))
    for n, t in plan.saved_values.items():
        out.append(f"  [[maybe_unused]] const {t}& {n} = s.{n};")
    for n in plan.forward_values:
        out.append(f"  [[maybe_unused]] const auto& {n} = s.{n};")
    # metadata helpers: <arg>_sizes / <arg>_meta read the node's input metadata
    all_formulas = " ".join(f for _, f in op.formulas)
    used = idents(all_formulas)
    for a, i in tensor_idx.items():
        if f"{a}_sizes" in used:
            out.append(f"  const Shape& {a}_sizes = n.inputs[{i}].shape;")
        if f"{a}_meta" in used:
            out.append(f"  const TensorMeta& {a}_meta = n.inputs[{i}];")
    # which inputs are wanted, asked once each; then unpack each saved tensor once, when some input
    # that reads it is wanted
    used_idx = sorted({tensor_idx[nm] for names, _ in op.formulas for nm in names if nm in tensor_idx
                       and not (list_arg and names == [list_arg.name])})
    for i in used_idx:
        out.append(f"  const bool need{i} = n.needs({i});")
    for t, (is_out, users) in plan.saved_tensors.items():
        cond = " || ".join(f"need{u}" for u in sorted(users)) or "true"
        out.append(f"  const Tensor {t} = ({cond}) ? n.unpack(s.{t}) : Tensor();")
    out.append(f"  variable_list r({nin});")
    for names, formula in op.formulas:
        if list_arg and names == [list_arg.name]:
            out.append(f"  r = {formula};")
            continue
        idx = [tensor_idx[nm] for nm in names]
        if len(names) == 1:
            out.append(f"  if (need{idx[0]}) r[{idx[0]}] = {formula};")
        else:
            cond = " || ".join(f"need{i}" for i in idx)
            mask = ", ".join(f"need{i}" for i in idx)
            out.append(f"  if ({cond}) {{")
            out.append(f"    [[maybe_unused]] const std::array<bool, {len(idx)}> grad_input_mask{{{mask}}};")
            out.append(f"    variable_list g_ = {formula};")
            for k, i in enumerate(idx):
                out.append(f"    if (need{i}) r[{i}] = std::move(g_[{k}]);")
            out.append("  }")
    out.append("  return r;")
    out.append("}")
    return out


def gen_record(op: Op, types: Types, plan: RulePlan, result_expr: list[str], before: bool,
               part: str = "all") -> list[str]:
    """The lines that fill node `n` (inside `if (auto n = record_op(...))`). part: "all", "inputs"
    (only the saves of input tensors) or "rest" (everything else: values and output saves)."""
    out = []
    tensor_args = op.tensor_args
    tensor_idx = {a.name: i for i, a in enumerate(tensor_args)}
    ndiff = len(tensor_args)
    rnames = result_names(op)
    if part != "inputs":
        for n, t in plan.saved_values.items():
            a = next(a for a in op.args if a.name == n)
            v = f"{n}.value({cpp_str(op.name)})" if a.base in types.enums else n
            out.append(f"    n->saved.{n} = {v};")
        for n, (t, e) in plan.forward_values.items():
            out.append(f"    n->saved.{n} = {e};")
    for t, (is_out, users) in plan.saved_tensors.items():
        if (part == "inputs" and is_out) or (part == "rest" and not is_out):
            continue
        tol = save_tolerance(op, t)
        if is_out:
            expr = result_expr[rnames.index(t)]
            out.append(f"    n->save(n->saved.{t}, {expr}, true{tol});")
            continue
        val = t
        if op.inplace and t == op.args[0].name:
            val = f"graft::clone({t})"  # the old value of self, before the kernel writes it
        if len(users) < ndiff:
            cond = " || ".join(f"n->has_edge({u})" for u in sorted(users))
            out.append(f"    n->save(n->saved.{t}, ({cond}) ? {val} : Tensor(), false{tol});")
        else:
            out.append(f"    n->save(n->saved.{t}, {val}, false{tol});")
    return out


def save_tolerance(op: Op, saved: str) -> str:
    """The SaveTolerance argument of n->save for a saved tensor ('' when exact, the default)."""
    kind = op.compress.get(saved)
    if kind is None:
        return ""
    return ", SaveTolerance::kLossy" if kind == "lossy" else ", SaveTolerance::kSignOnly"


def autocast_ident(op: Op) -> str:
    return op.full_name.replace(".", "_")


def autocast_policy_expr(op: Op) -> str:
    cpu, cuda = (AUTOCAST_POLICIES.get(op.autocast.get(d, ""), "None") for d in AUTOCAST_DEVICES)
    return f"OpPolicy{{CastPolicy::{cpu}, CastPolicy::{cuda}}}"


def gen_autocast_policies_h(ops: list[Op]) -> str:
    """One constant per op with a policy (what its graft:: function, generated or composite, passes
    to autocast::detail::OpCast) and the table of every public function (autocast::op_policy)."""
    out = [HEADER, "#pragma once",
           "// The autocast policy of every public graft:: function (`autocast:` in codegen/ops/*.yaml).",
           '#include "autograd/autocast.h"', "", "namespace graft::autocast::policies {", ""]
    public = [op for op in public_ops(ops) if {"function", "method"} & op.variants]
    for op in public:
        if op.autocast:
            out.append(f"inline constexpr OpPolicy {autocast_ident(op)} = {autocast_policy_expr(op)};")
    out.append("")
    out.append("inline constexpr NamedPolicy kAll[] = {")
    for op in public:
        out.append(f"    {{{cpp_str(op.full_name)}, {autocast_policy_expr(op)}}},")
    out.append("};")
    out.append("")
    out.append("}  // namespace graft::autocast::policies")
    return "\n".join(out) + "\n"


def gen_autocast_prologue(op: Op) -> list[str]:
    """Casts the inputs and re-enters with autocast suspended (autograd/autocast.h, invariants 1-3),
    before anything is recorded."""
    if not op.autocast:
        return []
    list_arg = next((a for a in op.args if a.is_tensor_list), None)
    ptrs = "{" + ", ".join(f"&{a.name}" for a in op.args if a.is_tensor) + "}"
    head = f"{cpp_str(op.full_name)}, autocast::policies::{autocast_ident(op)}, "
    ctor = head + (f"{list_arg.name}, {ptrs}" if list_arg else ptrs)
    args = ", ".join(f"cast_({a.name})" if (a.is_tensor or a.is_tensor_list) else a.name for a in op.args)
    return ["  if (autocast::detail::active()) [[unlikely]] {",
            f"    autocast::detail::OpCast cast_({ctor});",
            f"    if (cast_) return graft::{op.name}({args});",
            "  }"]


def gen_functional_cpp(ops: list[Op], types: Types) -> str:
    out = [HEADER,
           "// graft::'s differentiable ops: for each declared op with a derivative, the Saved struct its",
           "// rule reads, the rule (the declared formulas), and the public function that runs ops:: and",
           "// records the rule. Formulas are written with differentiable graft:: ops, so create_graph",
           "// gives higher orders; helpers they call live in autograd/derivatives.h.",
           "#include <array>", '#include "autograd/autocast_policies.h"', '#include "autograd/derivatives.h"', "",
           "namespace graft {", "using namespace autograd;", "using namespace autograd::rules;", "",
           "namespace {", ""]
    diffs = [op for op in public_ops(ops) if op.differentiable]
    plans = {}
    for op in diffs:
        plans[op.full_name] = plan_rule(op, types)
        for name in op.compress:
            if name not in plans[op.full_name].saved_tensors:
                raise DeclError(f"{op.where}: 'compress:' names {name}, which {op.full_name}'s rule does not save "
                                f"(it saves: {', '.join(plans[op.full_name].saved_tensors) or 'nothing'})")
        out.extend(gen_rule(op, types, plans[op.full_name]))
        out.append("")
    out.append("}  // namespace\n")
    for op in public_ops(ops):
        if op.composite:
            continue
        if "function" not in op.variants and "method" not in op.variants:
            continue
        ret = types.ret(op)
        out.append(f"{ret} {op.name}({params(op, types, 'api', False)}) {{")
        call = f"ops::{op.name}({arg_names(op)})"
        out.extend(gen_autocast_prologue(op))
        if not op.differentiable:
            if ret == "void":
                out.append(f"  {call};")
            else:
                out.append(f"  return {call};")
            out.append("}")
            continue
        out.extend(gen_wrapper_body(op, types, plans[op.full_name], call))
        out.append("}")
    out.append("\n}  // namespace graft")
    return "\n".join(out) + "\n"


def gen_wrapper_body(op: Op, types: Types, plan: RulePlan, call: str) -> list[str]:
    out = []
    tensor_args = op.tensor_args
    list_arg = next((a for a in op.args if a.is_tensor_list), None)
    ins = list_arg.name if list_arg else "{" + ", ".join(f"&{a.name}" for a in tensor_args) + "}"
    node = cpp_str(op.node_name)
    rule = rule_name(op)
    ret = types.ret(op)
    rnames = result_names(op)
    if op.inplace:
        self_ = op.args[0].name
        out.append(f"  check_inplace({self_}, {cpp_str(op.name)});")
        out.append(f"  auto n = record_op({node}, {rule}, {ins});")
        saves_result = any(plan.saved_tensors[t][0] for t in plan.saved_tensors)
        before = [l for l in gen_record(op, types, RulePlan(
            {k: v for k, v in plan.saved_tensors.items() if not v[0]}, plan.saved_values, plan.forward_values),
            [], True)]
        if before:
            out.append("  if (n) {")
            out.extend("  " + l for l in before)
            out.append("  }")
        out.append(f"  {call};")
        out.append("  if (n) {")
        out.append(f"    n->add_input_metadata({self_});")
        out.append(f"    rebase_history({self_}, n);")
        # self is now the node's output: saved as one (no copy, and no reference cycle), at the
        # version the kernel left, so a later in-place write is caught at unpack, as in PyTorch.
        if saves_result:
            out.append(f"    n->save(n->saved.result, {self_}, true{save_tolerance(op, 'result')});")
        out.append("  }")
        out.append(f"  return {self_};")
        return out
    if op.view:
        out.append(f"  {ret} y = {call};")
        out.append("  if (!is_recording_enabled()) return y;")
        out.append(f"  if (auto n = record_op({node}, {rule}, {ins})) {{")
        if ret == "Tensor":
            out.append("    set_output(n, y);")
        else:
            out.append("    for (auto& p : y) set_output(n, p);")
        out.extend(gen_record(op, types, plan, ["y"], False))
        out.append("  }")
        base = tensor_args[0].name
        if ret == "Tensor":
            out.append(f"  set_view_of(y, {base});")
        else:
            out.append(f"  for (auto& p : y) set_view_of(p, {base});")
        out.append("  return y;")
        return out
    # The node and the saves of inputs come before the kernel, as in PyTorch: a checkpoint's
    # recomputation that stops early (autograd/checkpoint.h) stops at the save of the last tensor it
    # needs, so the op that saves it never runs its kernel again (a ViT block's last linear and its
    # residual add, in each re-run of the block). Outputs are saved after it, as they must be.
    inputs_first = gen_record(op, types, plan, [], False, "inputs")
    if inputs_first:
        out.append(f"  auto n = record_op({node}, {rule}, {ins});")
        out.append("  if (n) {")
        out.extend(inputs_first)
        out.append("  }")
        out.append(f"  {ret} y = {call};")
        out.append("  if (n) {")
    else:
        out.append(f"  {ret} y = {call};")
        out.append(f"  if (auto n = record_op({node}, {rule}, {ins})) {{")
    if ret == "Tensor":
        out.append("    set_output(n, y);")
        res = ["y"]
    else:
        diff = op.output_diff or [True] * len(op.rets)
        for i, d in enumerate(diff):
            if d:
                out.append(f"    set_output(n, y[{i}]);")
        res = [f"y[{i}]" for i in range(len(op.rets))]
    out.extend(gen_record(op, types, plan, res, False, "rest" if inputs_first else "all"))
    out.append("  }")
    out.append("  return y;")
    return out


def gen_tensor_methods_cpp(ops: list[Op], types: Types) -> str:
    out = [HEADER, "// Tensor's op methods: each forwards to graft::, so a method call and a function call record",
           "// the same history.", '#include "autograd/functional.h"', "", "namespace graft {", ""]
    for op in method_ops(ops):
        ret = types.ret(op)
        const = "" if op.inplace else " const"
        self_ = "*this"
        rest = arg_names(op, skip_self=True)
        call = f"graft::{op.name}({self_}{', ' + rest if rest else ''})"
        out.append(f"{ret} Tensor::{op.name}({params(op, types, 'api', False, skip_self=True)}){const} {{ "
                   f"return {call}; }}")
    out.append("\n}  // namespace graft")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------
# tests


GEN_DIFF = {"real", "pos", "nonzero", "unit", "distinct"}


def gen_case_lambda(op: Op, c: Check) -> tuple[str, list[str], list[str]]:
    """-> (lambda taking the differentiable inputs, setup lines, names of differentiable inputs)."""
    setup, diff = [], []
    for name, g in c.inputs:
        fn = g.split("(", 1)[0].strip()
        if fn in GEN_DIFF:
            diff.append(name)
            setup.append(f"    Tensor {name}_v = gen::{g};")
        elif fn == "const":
            setup.append(f"    const auto {name} = {g[len('const('):-1]};")
        else:
            setup.append(f"    const auto {name} = gen::{g};")
    unpack = "".join(f"const Tensor& {n} = in[{i}]; " for i, n in enumerate(diff))
    lam = f"[&](const std::vector<Tensor>& in) {{ {unpack}return graft::test::as_outputs({c.expr}); }}"
    return lam, setup, diff


def gen_op_cases(ops: list[Op], types: Types) -> str:
    out = [HEADER,
           "// The per-op cases of the declarations: gradcheck and gradgradcheck of every differentiable op",
           "// (each `check:` line, on contiguous and non-contiguous inputs), the ops::/graft:: agreement, and",
           "// the table's coverage of the op registry. Each case also asserts that it dispatched its op.",
           "#include <catch2/catch.hpp>", "", '#include "graft.h"', '#include "support/op_case.h"', "",
           "using namespace graft;", "using namespace graft::autograd;", "namespace gen = graft::test::gen;", ""]
    out.append('TEST_CASE("the op table and the op registry name the same ops") {')
    out.append("  graft::test::check_table_matches_registry(graft::test::declared_ops());\n}\n")
    for op in ops:
        if not op.checks:
            continue
        twice = op.once is None
        for k, c in enumerate(op.checks):
            lam, setup, diff = gen_case_lambda(op, c)
            title = f"{op.full_name} [{k}]: {c.expr}"
            out.append(f"TEST_CASE({cpp_str('gradcheck ' + title)}, \"[gradcheck]\") {{")
            out.append("  manual_seed(" + str(k + 1) + ");")
            out.append("  {")
            out.extend(setup)
            vals = ", ".join(f"{n}_v" for n in diff)
            flags = []
            if "nolayouts" in c.options:
                flags.append("graft::test::kNoLayouts")
            if not twice or "once" in c.options:
                flags.append("graft::test::kOnce")
            if op.composite:
                flags.append("graft::test::kComposite")
            fl = " | ".join(flags) if flags else "0"
            out.append(f"    graft::test::check_op_case({cpp_str(op.full_name)}, {lam}, {{{vals}}}, {fl});")
            out.append("  }")
            out.append("}")
    # agreement: graft:: under no_grad gives ops::'s result, for every op with both forms
    for op in ops:
        if not op.differentiable or op.composite or op.inplace or op.api == "ops" or not op.checks:
            continue
        c = op.checks[0]
        m = re.match(rf"^(graft::)?{re.escape(op.name)}\((.*)\)$", c.expr)
        if not m:
            continue
        lam, setup, diff = gen_case_lambda(op, c)
        ops_expr = f"ops::{op.name}({m.group(2)})"
        gexpr = f"graft::{op.name}({m.group(2)})"
        unpack = "".join(f"const Tensor& {n} = in[{i}]; " for i, n in enumerate(diff))
        out.append(f"TEST_CASE({cpp_str('ops:: and graft:: agree: ' + op.full_name)}, \"[agreement]\") {{")
        out.append("  manual_seed(1);")
        out.extend(s[2:] for s in setup)
        vals = ", ".join(f"{n}_v" for n in diff)
        out.append(f"  graft::test::check_agreement([&](const std::vector<Tensor>& in) {{ {unpack}return "
                   f"graft::test::as_outputs({ops_expr}); }}, [&](const std::vector<Tensor>& in) {{ {unpack}return "
                   f"graft::test::as_outputs({gexpr}); }}, {{{vals}}});")
        out.append("}")
    return "\n".join(out) + "\n"


def gen_op_table(ops: list[Op]) -> str:
    out = [HEADER, "// The op table as the tests see it: every declared op with why it has no derivative or no CUDA",
           "// kernel, and which ops have generated CPU-vs-CUDA cases.", '#include "support/op_case.h"', "",
           "namespace graft::test {", "",
           "const std::vector<DeclaredOp>& declared_ops() {", "  static const std::vector<DeclaredOp> v = {"]
    for op in ops:
        out.append(f"      {{{cpp_str(op.full_name)}, {cpp_str(op.nondiff or '')}, {cpp_str(op.cuda or '')}, "
                   f"{'false' if op.registered else 'true'}, {len(op.checks)}}},")
    out.append("  };\n  return v;\n}\n")
    names = sorted({op.full_name for op in ops if op.cuda is None and any("nocuda" not in c.options for c in op.checks)})
    out.append("const std::set<std::string>& ops_with_cuda_cases() {")
    out.append("  static const std::set<std::string> s = {" + ", ".join(cpp_str(n) for n in names) + "};")
    out.append("  return s;\n}\n\n}  // namespace graft::test")
    return "\n".join(out) + "\n"


def gen_op_cases_cuda(ops: list[Op], types: Types) -> str:
    out = [HEADER,
           "// CPU vs CUDA for every declared case: each `check:` line runs on both devices in float32 and",
           "// float64, and (a second test case, tagged [reduced]) in bfloat16 and float16, forward and",
           "// backward with the same output gradient; CUDA must match the CPU within each dtype's",
           "// tolerance (support/op_case.h). Linked into the CPU-vs-CUDA harness, whose main reports",
           "// SKIPPED without a GPU.",
           "#include <catch2/catch.hpp>", "", '#include "graft.h"', '#include "support/op_case.h"', "",
           "using namespace graft;", "namespace gen = graft::test::gen;", ""]
    for op in ops:
        if op.cuda is not None or not op.checks:
            continue
        for k, c in enumerate(op.checks):
            if "nocuda" in c.options:
                continue
            setup, diff, consts = [], [], []
            for name, g in c.inputs:
                fn = g.split("(", 1)[0].strip()
                if fn in GEN_DIFF:
                    diff.append(name)
                    setup.append(f"  Tensor {name}_v = gen::{g};")
                else:
                    consts.append(name)
                    val = g[len("const("):-1] if fn == "const" else f"gen::{g}"
                    setup.append(f"  const auto {name}_cpu = {val};")
            moves = "".join(f"[[maybe_unused]] const auto {n} = graft::test::on_device({n}_cpu, dev, dt); " for n in consts)
            unpack = "".join(f"const Tensor& {n} = in[{i}]; " for i, n in enumerate(diff))
            vals = ", ".join(f"{n}_v" for n in diff)
            # The 16-bit run only where the case has floating inputs for the dtype to change.
            runs = [("", "[cuda][table]", "kFloat32, kFloat64")]
            if diff:
                runs.append((" [bf16, f16]", "[cuda][table][reduced]", "kBFloat16, kFloat16"))
            for suffix, tags, dtypes in runs:
                title = f"cuda matches cpu: {op.full_name} [{k}]{suffix}: {c.expr}"
                out.append(f"TEST_CASE({cpp_str(title)}, {cpp_str(tags)}) {{")
                out.append(f"  manual_seed({k + 1});")
                out.extend(setup)
                out.append(f"  graft::test::check_cuda_case({cpp_str(op.full_name)}, [&](const std::vector<Tensor>& in, "
                           f"[[maybe_unused]] Device dev, [[maybe_unused]] DType dt) {{ {moves}{unpack}return graft::test::as_outputs({c.expr}); }}, "
                           f"{{{vals}}}, {{{dtypes}}});")
                out.append("}")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------


def write_if_changed(path: str, text: str):
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layer", required=True, choices=["runtime", "ops", "cuda", "autograd", "tests", "tests_cuda"])
    ap.add_argument("--out", required=True)
    ap.add_argument("decls", nargs="+")
    a = ap.parse_args(argv)
    try:
        ops, enums = build_model(sorted(a.decls))
        types = Types(enums)
        files = {}
        if a.layer == "runtime":
            files = {"op_options.h": gen_op_options(enums), "tensor_methods.h": gen_tensor_methods_h(ops, types)}
        elif a.layer == "ops":
            files = {"ops_generated.h": gen_ops_h(ops, types), "ops_generated.cpp": gen_ops_cpp(ops, types),
                     "cpu_kernels.h": gen_kernels_h(ops, types, "cpu"),
                     "cpu_registration.cpp": gen_registration(ops, types, "cpu")}
        elif a.layer == "cuda":
            files = {"cuda_kernels.h": gen_kernels_h(ops, types, "cuda"),
                     "cuda_registration.cpp": gen_registration(ops, types, "cuda"),
                     "elementwise_table.h": gen_cuda_table_h(ops),
                     "elementwise_table.cu": gen_cuda_table_cu(ops)}
        elif a.layer == "autograd":
            files = {"functional_generated.h": gen_functional_h(ops, types),
                     "functional_generated.cpp": gen_functional_cpp(ops, types),
                     "autocast_policies.h": gen_autocast_policies_h(ops),
                     "tensor_methods_generated.cpp": gen_tensor_methods_cpp(ops, types)}
        elif a.layer == "tests":
            files = {"op_cases.cpp": gen_op_cases(ops, types), "op_table.cpp": gen_op_table(ops)}
        elif a.layer == "tests_cuda":
            files = {"op_cases_cuda.cpp": gen_op_cases_cuda(ops, types)}
        for name, text in files.items():
            write_if_changed(os.path.join(a.out, name), text)
    except DeclError as e:
        print(f"opgen: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
