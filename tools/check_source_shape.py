#!/usr/bin/env python3
"""Checks the shape a newcomer can hold: no Swift source file over 400 lines and no function (or
initialiser) over 80, generated tables aside.

A function's length runs from its declaration to its closing brace; braces inside string literals,
multi-line string literals and comments are not counted.

    tools/check_source_shape.py [ROOT]     (ROOT: Sources/ beside this script)

Prints each file or function over its limit as FILE:LINE and a count of what was read; exit 1 when one
is over.
"""
import re
import sys
from pathlib import Path

MAXIMUM_FILE_LINES = 400
MAXIMUM_FUNCTION_LINES = 80
# Data tables written by a tool, not by hand.
GENERATED = {"KnownInterfacesData.swift"}
DECLARATION = re.compile(r"\b(func\s+[\w`]+|init[?!]?\s*[(<])")


def code_only(lines):
    """Each line with string literals (single- and multi-line) and // comments blanked out."""
    out, in_multiline = [], False
    for line in lines:
        if in_multiline:
            if '"""' in line:
                in_multiline = False
            out.append("")
            continue
        if line.count('"""') == 1:
            in_multiline = True
            out.append(line.split('"""')[0])
            continue
        kept, in_string, i = [], False, 0
        while i < len(line):
            ch = line[i]
            if not in_string and line.startswith("//", i):
                break
            if in_string and ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = not in_string
            elif not in_string:
                kept.append(ch)
            i += 1
        out.append("".join(kept))
    return out


def long_functions(lines):
    """(line number, length, declaration) of each function longer than the limit."""
    code = code_only(lines)
    found = []
    for start, line in enumerate(code):
        if not DECLARATION.search(line):
            continue
        depth, opened, end = 0, False, start
        while end < len(code):
            for ch in code[end]:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if opened and depth <= 0:
                break
            if not opened and end > start + 8:  # a requirement without a body
                break
            end += 1
        length = end - start + 1
        if opened and length > MAXIMUM_FUNCTION_LINES:
            found.append((start + 1, length, lines[start].strip()))
    return found


def check(root):
    problems, files, functions = [], 0, 0
    for path in sorted(root.rglob("*.swift")):
        if path.name in GENERATED:
            continue
        files += 1
        lines = path.read_text(encoding="utf-8").split("\n")
        where = path.relative_to(root.parent)
        count = len(lines) - (1 if lines and lines[-1] == "" else 0)
        if count > MAXIMUM_FILE_LINES:
            problems.append(f"{where}: {count} lines (at most {MAXIMUM_FILE_LINES})")
        functions += sum(1 for line in code_only(lines) if DECLARATION.search(line))
        for number, length, declaration in long_functions(lines):
            problems.append(f"{where}:{number}: {length} lines (at most {MAXIMUM_FUNCTION_LINES}): {declaration}")
    return problems, files, functions


def main():
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "Sources"
    if not root.is_dir():
        print(f"check_source_shape: {root} is not a directory", file=sys.stderr)
        return 2
    problems, files, functions = check(root)
    for p in problems:
        print(p)
    print(f"check_source_shape: {files} files, {functions} functions read, {len(problems)} over the limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
