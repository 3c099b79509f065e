#!/usr/bin/env python3
"""Unfaulted supervised replays: do they all end, and does each give the in-process run's output?

Runs `Pipelines/replay-bag-multiprocess.yaml` (bag, calibration, fusion, csv and record, each stage in its
own process over ipc) N times under `--supervise`, with no fault injected, and once in one process
(`fusion-node --config` without --supervise) as the reference. A run fails when it does not end within
--timeout seconds (a hang: the supervisor and its stages are killed), exits other than 0, or its CSV or
its recording's messages (`fusion-node bag echo`) differ from the reference's.

Usage: python3 tools/supervised_runs.py BAG [--runs 50] [--timeout 120] [--node PATH]
Prints one line per failed run and the counts; exits 1 when any run failed.
"""
import argparse, os, signal, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / 'Pipelines' / 'replay-bag-multiprocess.yaml'


def run(node, bag, out, supervise, timeout):
    """(exit code or None on a hang, seconds, stderr tail)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, 'BAG': str(bag), 'CSV': str(out / 'replay.csv'), 'RECORD': str(out / 'replay.mcap')}
    args = [str(node), '--config', str(PIPELINE)] + (['--supervise'] if supervise else [])
    started = time.monotonic()
    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        return None, time.monotonic() - started, err[-1500:]
    return p.returncode, time.monotonic() - started, err[-1500:]


def messages(node, recording):
    r = subprocess.run([str(node), 'bag', 'echo', str(recording)], capture_output=True, text=True)
    return r.returncode, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('bag', type=Path)
    ap.add_argument('--runs', type=int, default=50)
    ap.add_argument('--timeout', type=float, default=120)
    ap.add_argument('--node', type=Path, default=ROOT / '.build/release/fusion-node')
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix='supervised-'))
    code, seconds, err = run(a.node, a.bag, work / 'reference', False, a.timeout)
    if code != 0:
        sys.exit(f'the in-process run exited {code}: {err}')
    reference_csv = (work / 'reference' / 'replay.csv').read_bytes()
    rc, reference_messages = messages(a.node, work / 'reference' / 'replay.mcap')
    if rc != 0:
        sys.exit('the in-process recording does not read back')
    rows, recorded = reference_csv.count(b'\n') - 1, len(reference_messages.splitlines())
    print(f'reference (one process): {seconds:.1f} s, {rows} rows, {recorded} recorded messages')
    failures, times = 0, []
    for i in range(a.runs):
        out = work / f'run-{i}'
        code, seconds, err = run(a.node, a.bag, out, True, a.timeout)
        times.append(seconds)
        problem = None
        if code is None:
            problem = f'no end after {a.timeout:.0f} s'
        elif code != 0:
            problem = f'exit {code}'
        elif (out / 'replay.csv').read_bytes() != reference_csv:
            problem = 'CSV differs from the in-process run'
        elif messages(a.node, out / 'replay.mcap') != (0, reference_messages):
            problem = 'recording differs from the in-process run'
        if problem:
            failures += 1
            print(f'run {i}: {problem}; stderr ends: {err[-600:]}')
        else:
            subprocess.run(['rm', '-rf', str(out)])
    print(f'{a.runs - failures} of {a.runs} supervised runs ended with exit 0 and output byte-identical to the '
          f'in-process run; {min(times):.1f} to {max(times):.1f} s each')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
