"""Every "Default N" a doc comment gives agrees with the code under it (tools/check_default_comments.py)."""
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "check_default_comments.py"


def run(root=None):
    return subprocess.run([sys.executable, str(TOOL)] + ([str(root)] if root else []),
                          capture_output=True, text=True, timeout=60)


def test_the_sources_defaults_agree_with_their_comments():
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    agreed = int(r.stdout.split("check_default_comments: ")[1].split(" agree")[0])
    assert agreed >= 100, r.stdout  # the comments are found, not skipped


def test_a_drifted_default_is_named(tmp_path):
    sources = tmp_path / "Sources"
    sources.mkdir()
    (sources / "Settings.swift").write_text(
        "struct S {\n"
        "    /// Time constant of the bank, seconds. Default 0.5: a turn's worth.\n"
        "    var yawSeconds = 0.2\n"
        "    /// Chunk size. Default 1 MiB.\n"
        "    var chunkBytes = 1 << 20\n"
        "    /// Readings kept. Default 20,000.\n"
        "    public internal(set) var kept: Int = 20_000\n"
        "    /// Whether to learn. Default true.\n"
        "    var learn = false\n"
        "}\n")
    r = run(sources)
    assert r.returncode == 1
    assert "Sources/Settings.swift:3: yawSeconds: the comment says Default 0.5, the code 0.2" in r.stdout
    assert "Sources/Settings.swift:9: learn: the comment says Default true, the code false" in r.stdout
    assert "2 agree, 2 disagree" in r.stdout
