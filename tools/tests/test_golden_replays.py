"""The golden replays (tools/golden_replays.py): short recordings of the seeded simulator replayed by this
build must write exactly the checked-in CSVs, byte for byte, with the same exit codes. A change meant to
alter the filter's output rewrites them (`tools/golden_replays.py --write`) with a CHANGELOG line that
says why; any other change that alters them fails here, naming the first differing row.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import golden_replays  # noqa: E402

from test_bag_interop import node  # noqa: E402,F401  (fixture)


def test_the_golden_replays_are_byte_identical(node):
    assert golden_replays.check(node) == []


def test_a_difference_names_its_row():
    assert golden_replays.first_difference(b't,a\n1,2\n3,4\n', b't,a\n1,2\n3,5\n') == \
        "row 3: expected '3,4', got '3,5'"
    assert golden_replays.first_difference(b't\n1\n', b't\n') == '2 rows expected, 1 written'
