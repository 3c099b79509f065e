#!/usr/bin/env python3
"""What the retransmit buffer costs a live stream, and what a restarted sink costs.

A live pipeline (lines on stdin -> fusion -> csv), every stage in its own process under
--supervise over ipc, is fed N samples as fast as it takes them, in interleaved rounds with
retransmission on (the default, 5 s) and off (`retransmit: {seconds: 0}`). Prints per round the
wall time and the CPU time of all processes, and the medians with their ratio (on/off).

    tools/.venv/bin/python tools/bench_retransmit.py [--node .build/release/fusion-node] [--samples 300000] [--rounds 3]
"""
import argparse, os, resource, statistics, subprocess, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lines(n):
    return ''.join(f'{1_700_000_000 + k * 0.001:.3f},0,0,{0.1 + 0.05 * (k % 7):.2f},0,0,9.81,1.9e-05,0,-4.4e-05\n'
                   for k in range(n))


def run(node, work, feed, retransmit):
    config = work / f'live-{retransmit}.yaml'
    config.write_text(f"""retransmit: {{seconds: {retransmit}}}
stages:
  serial:
    type: lines
    endpoint: ipc://{work}/serial-{retransmit}
  fusion:
    type: fusion
    inputs: [serial]
    endpoint: ipc://{work}/fusion-{retransmit}
  out:
    type: csv
    inputs: [fusion]
    path: {work}/out-{retransmit}.csv
""")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with open(feed) as stdin:
        p = subprocess.run([str(node), '--config', str(config), '--supervise'], stdin=stdin,
                           capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert p.returncode == 0, p.stderr
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rows = sum(1 for _ in open(work / f'out-{retransmit}.csv')) - 1
    return wall, cpu, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--node', default=str(ROOT / '.build' / 'release' / 'fusion-node'))
    ap.add_argument('--samples', type=int, default=300_000)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        feed = work / 'feed.txt'
        feed.write_text(lines(a.samples))
        results = {5: [], 0: []}
        for r in range(a.rounds):
            for seconds in (5, 0) if r % 2 == 0 else (0, 5):
                wall, cpu, rows = run(a.node, work, feed, seconds)
                assert rows == a.samples, (rows, a.samples)
                results[seconds].append((wall, cpu))
                print(f'round {r + 1}: retransmit {seconds} s: {wall:.2f} s wall, {cpu:.2f} s CPU, '
                      f'{a.samples / wall:,.0f} samples/s')
        on = [statistics.median(x) for x in zip(*results[5])]
        off = [statistics.median(x) for x in zip(*results[0])]
        print(f'median: on {on[0]:.2f} s wall / {on[1]:.2f} s CPU; off {off[0]:.2f} s / {off[1]:.2f} s; '
              f'on/off wall {on[0] / off[0]:.3f}, CPU {on[1] / off[1]:.3f}')


if __name__ == '__main__':
    main()
