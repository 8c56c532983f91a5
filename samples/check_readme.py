#!/usr/bin/env python3
"""Keeps README.md's C++ code blocks from drifting away from what builds.

Every ```cpp block in the README is one of two kinds, and this check fails on any other:
  - a sample: the line before its fence is `<!-- sample: samples/NAME.cpp -->` (invisible when the
    README is rendered) and the block is that file, byte for byte. samples/meson.build builds and
    runs the file, so the README shows a program that compiles and works.
  - a fragment: its first line is a comment starting `// Fragment:` that says what the reader
    supplies; it is not compiled.

Usage: check_readme.py README.md SAMPLE.cpp...
The SAMPLE files are the README samples the build compiles: each must be shown in the README, and
every sample the README names must be one of them (so a new README program cannot skip the build).
To change a README sample, edit the file in samples/ and paste it into the README (or the reverse):
this test prints the difference when they disagree.
"""
import difflib
import os
import re
import sys

SAMPLE_MARK = re.compile(r"^<!-- sample: (\S+) -->$")
FRAGMENT_MARK = "// Fragment:"


def cpp_blocks(lines):
    """(line number of the fence, text of the line before it, the block's lines) per ```cpp block."""
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].rstrip() == "```cpp":
            start = i
            i += 1
            body = []
            while i < len(lines) and lines[i].rstrip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise SystemExit(f"README.md:{start + 1}: a ```cpp block is never closed")
            blocks.append((start + 1, lines[start - 1].rstrip() if start > 0 else "", body))
        i += 1
    return blocks


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    readme = os.path.realpath(sys.argv[1])
    root = os.path.dirname(readme)
    built = {os.path.realpath(p) for p in sys.argv[2:]}
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")

    errors, shown = [], set()
    for line, before, body in cpp_blocks(lines):
        mark = SAMPLE_MARK.match(before)
        if mark:
            path = os.path.realpath(os.path.join(root, mark.group(1)))
            if path not in built:
                errors.append(f"README.md:{line}: {mark.group(1)} is not among the samples the build compiles "
                              "(add it to readme_samples in samples/meson.build)")
                continue
            shown.add(path)
            with open(path, encoding="utf-8") as f:
                want = f.read().split("\n")
            if want and want[-1] == "":
                want.pop()  # the file's final newline is the fence's line break in the README
            if body != want:
                diff = difflib.unified_diff(want, body, mark.group(1), f"README.md (block at line {line})", lineterm="")
                errors.append(f"README.md:{line}: the block differs from {mark.group(1)}:\n" + "\n".join(diff))
        elif not (body and body[0].startswith(FRAGMENT_MARK)):
            errors.append(f"README.md:{line}: a ```cpp block must be a sample (`<!-- sample: samples/NAME.cpp -->` on "
                          f"the line before the fence) or start with `{FRAGMENT_MARK}`")
    for path in sorted(built - shown):
        errors.append(f"{os.path.relpath(path, root)} is built as a README sample but no README block shows it")
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"README.md: {len(shown)} sample(s) match their files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
