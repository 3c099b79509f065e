"""No Swift source file over 400 lines and no function over 80 (tools/check_source_shape.py)."""
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "check_source_shape.py"


def run(root=None):
    return subprocess.run([sys.executable, str(TOOL)] + ([str(root)] if root else []),
                          capture_output=True, text=True, timeout=60)


def test_the_sources_keep_to_the_limits():
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    files = int(r.stdout.split("check_source_shape: ")[1].split(" files")[0])
    assert files >= 200, r.stdout  # the sources are found, not skipped


def test_a_long_function_and_a_long_file_are_named(tmp_path):
    sources = tmp_path / "Sources"
    sources.mkdir()
    body = "\n".join(f"        x += {i}  // {{ a brace in a comment" for i in range(80))
    (sources / "Long.swift").write_text(
        "struct S {\n"
        "    func short() -> String { \"}}}}\" }\n"
        f"    mutating func long() {{\n        var x = 0\n{body}\n    }}\n"
        "}\n")
    (sources / "Big.swift").write_text("let text = \"\"\"\n{\n\"\"\"\n" + "// line\n" * 401)
    r = run(sources)
    assert r.returncode == 1
    assert "Sources/Long.swift:3: 83 lines (at most 80): mutating func long() {" in r.stdout, r.stdout
    assert "Sources/Big.swift: 404 lines (at most 400)" in r.stdout, r.stdout
    assert "short" not in r.stdout
