#!/usr/bin/env python3
"""Checks every "Default N" in a Swift doc comment against the value the declaration under it gives.

A setting's default is written in code; a doc comment that repeats it ("Default 0.5: ...") is a second
copy that can drift. This finds each doc comment that names a default and compares it with the literal
of the `var`/`let` it documents: numbers (with `_` or `,` digit separators, `<<` shifts, and KiB, MiB,
GiB in the comment), `true`/`false`. A default the code computes (a name, a call) is counted as not
comparable, never passed silently.

    tools/check_default_comments.py [ROOT]     (ROOT: Sources/ beside this script)

Prints each disagreement as FILE:LINE and a count of what was checked; exit 1 when one disagrees.
"""
import re
import sys
from pathlib import Path

NUMBER = r"[-+]?(?:\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+)"
COMMENT_DEFAULT = re.compile(r"\bDefault (" + NUMBER + r"|true|false)(?:\s*(KiB|MiB|GiB))?(?!\w|\.\d|,\d)")
DECLARATION = re.compile(
    r"^\s*(?:@\w+\s+)*(?:(?:public|internal|package|private|fileprivate)(?:\(set\))?\s+)*(?:static\s+)?"
    r"(?:var|let)\s+(\w+)(?:\s*:\s*[^=]+?)?\s*=\s*(.+?)\s*$")
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def comment_value(number, unit):
    if number in ("true", "false"):
        return number == "true"
    value = float(number.replace(",", "").replace("_", ""))
    return value * UNITS[unit] if unit else value


def code_value(literal):
    """The declaration's literal as a number or a bool; None when it is not a literal."""
    literal = literal.split("//")[0].strip()
    if literal in ("true", "false"):
        return literal == "true"
    if not re.fullmatch(r"[\d_.eE+\-\s<>()]+", literal):
        return None
    try:
        return float(eval(literal.replace("_", ""), {"__builtins__": {}}, {}))
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError):
        return None


def check(root):
    checked, uncomparable, disagreements = 0, [], []
    for path in sorted(root.rglob("*.swift")):
        lines = path.read_text(encoding="utf-8").split("\n")
        i = 0
        while i < len(lines):
            if not lines[i].strip().startswith("///"):
                i += 1
                continue
            j = i
            while j < len(lines) and lines[j].strip().startswith("///"):
                j += 1
            doc = " ".join(line.strip()[3:].strip() for line in lines[i:j])
            said = COMMENT_DEFAULT.search(doc)
            declaration = DECLARATION.match(lines[j]) if j < len(lines) else None
            if said and declaration:
                where = f"{path.relative_to(root.parent)}:{j + 1}"
                expected = comment_value(said.group(1), said.group(2))
                actual = code_value(declaration.group(2))
                if actual is None:
                    uncomparable.append(where)
                elif type(actual) is not type(expected) or (
                        isinstance(actual, float) and abs(actual - expected) > 1e-12 * max(1.0, abs(actual))) or (
                        isinstance(actual, bool) and actual != expected):
                    disagreements.append(
                        f"{where}: {declaration.group(1)}: the comment says Default {said.group(1)}"
                        f"{' ' + said.group(2) if said.group(2) else ''}, the code {declaration.group(2)}")
                else:
                    checked += 1
            i = j
    return checked, uncomparable, disagreements


def main():
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "Sources"
    if not root.is_dir():
        print(f"check_default_comments: {root} is not a directory", file=sys.stderr)
        return 2
    checked, uncomparable, disagreements = check(root)
    for d in disagreements:
        print(d)
    print(f"check_default_comments: {checked} agree, {len(disagreements)} disagree, "
          f"{len(uncomparable)} not comparable (a computed default): {', '.join(uncomparable) or 'none'}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
