#!/usr/bin/env python3
"""Golden replays: short recordings of the seeded simulator, replayed by fusion-node; what the replays
write (`--csv` and `--accuracy-csv`) is checked in as tools/golden/CASE.csv.gz and CASE-accuracy.csv.gz
and compared byte for byte by the test suite (tools/tests/test_golden_replays.py), so a change meant to
leave the filter's output alone (a refactor) shows that it did. Rewrite them only for a change meant to
alter the output, with a CHANGELOG line that says why.

  tools/golden_replays.py [--node BIN]            compare; names each case and its first differing row
  tools/golden_replays.py [--node BIN] --write    rewrite tools/golden/ from this build

BIN defaults to .build/debug/fusion-node. The recordings are made afresh each time (the simulator is
seeded, so they are the same bytes); only the outputs are kept.
"""
import argparse, gzip, json, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / 'tools' / 'golden'

# Recordings: the simulator's scenario, seconds, and settings beyond it; the topics recorded.
RECORDINGS = {
    # A hand-held device with hard iron: the online calibration, the gate, the Kalman filter.
    'hand': ('default', 20, 'hard_iron_ut: [25, -30, 12]', ['imu/data_raw', 'imu/mag']),
    # The first-minute tour: a figure eight, rest, tilting, walking and a magnet passing at 24-27 s.
    'tour': ('tour', 30, 'hard_iron_ut: [25, -30, 12]', ['imu/data_raw', 'imu/mag']),
    # A car with GNSS velocity at 10 Hz: the acceleration taken out of gravity, the heading from GNSS.
    'drive': ('drive', 40, 'gnss_rate_hz: 10', ['imu/data_raw', 'imu/mag', 'gnss/velocity']),
}
# Cases: the recording and the replay's options.
CASES = {
    'hand-kalman': ('hand', []),
    'hand-complementary': ('hand', ['--filter', 'complementary']),
    'hand-smoother': ('hand', ['--smooth']),
    'tour-kalman': ('tour', []),
    'drive-gnss': ('drive', ['--velocity-topic', '/gnss/velocity']),
}


def record(node, name, directory):
    scenario, seconds, extra, topics = RECORDINGS[name]
    bag = directory / f'{name}.mcap'
    config = directory / f'{name}.yaml'
    config.write_text(f"""stages:
  sim:
    type: simulator
    scenario: {scenario}
    seed: 1
    rate_hz: 100
    duration_s: {seconds}
    realtime: false
    {extra}
  rec:
    type: record
    inputs: [sim]
    path: {bag}
    topics: [{', '.join(topics)}]
""")
    r = subprocess.run([str(node), '--config', str(config)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f'recording {name}: exit {r.returncode}: {r.stderr[-2000:]}')
    return bag


def replay(node, case, bags, directory):
    """{'CASE.csv': bytes, 'CASE-accuracy.csv': bytes, 'exit': code} of one case."""
    recording, options = CASES[case]
    csv, accuracy = directory / f'{case}.csv', directory / f'{case}-accuracy.csv'
    r = subprocess.run([str(node), 'replay', str(bags[recording]), '--csv', str(csv), '--accuracy-csv',
                        str(accuracy), '--quiet', *options], capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 3, 4):
        raise RuntimeError(f'replay {case}: exit {r.returncode}: {r.stderr[-2000:]}')
    return {f'{case}.csv': csv.read_bytes(), f'{case}-accuracy.csv': accuracy.read_bytes(), 'exit': r.returncode}


def outputs(node):
    """Every case's outputs from this build: {file name: bytes}, plus the exit codes."""
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d)
        bags = {name: record(node, name, directory) for name in RECORDINGS}
        files, codes = {}, {}
        for case in CASES:
            out = replay(node, case, bags, directory)
            codes[case] = out.pop('exit')
            files.update(out)
        return files, codes


def first_difference(expected, actual):
    """The first row (1-based) where two CSVs differ, with both rows."""
    a, b = expected.decode().splitlines(), actual.decode().splitlines()
    for i, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f'row {i}: expected {x!r}, got {y!r}'
    return f'{len(a)} rows expected, {len(b)} written'


def check(node):
    """What differs from the checked-in outputs, one line per file; empty when nothing does."""
    files, codes = outputs(node)
    manifest = json.loads((GOLDEN / 'manifest.json').read_text())
    problems = []
    for case, code in codes.items():
        if manifest['exit'].get(case) != code:
            problems.append(f'{case}: exit {code}, golden {manifest["exit"].get(case)}')
    for name, data in files.items():
        path = GOLDEN / f'{name}.gz'
        if not path.exists():
            problems.append(f'{name}: no golden file {path.relative_to(ROOT)}')
            continue
        expected = gzip.decompress(path.read_bytes())
        if expected != data:
            problems.append(f'{name}: {first_difference(expected, data)}')
    return problems


def write(node):
    files, codes = outputs(node)
    GOLDEN.mkdir(exist_ok=True)
    for name, data in files.items():
        (GOLDEN / f'{name}.gz').write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    (GOLDEN / 'manifest.json').write_text(json.dumps({'exit': codes}, indent=1, sort_keys=True) + '\n')
    return sorted(files)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--node', default=str(ROOT / '.build' / 'debug' / 'fusion-node'))
    p.add_argument('--write', action='store_true', help='rewrite tools/golden/ from this build')
    a = p.parse_args()
    if a.write:
        for name in write(a.node):
            print(f'wrote tools/golden/{name}.gz')
        return 0
    problems = check(a.node)
    for line in problems:
        print(line)
    print('golden replays: ' + ('all identical' if not problems else f'{len(problems)} difference(s)'))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
