#!/usr/bin/env python3
"""How fast a stdout sink delivers live lines: Pipelines/live-lines.yaml fed one sample line at a time on
stdin, at 1 Hz and at 100 Hz, its JSON heading lines read from stdout through a pipe and through a
pseudo-terminal; prints p50/p99/max from writing a line to reading the heading it caused. Also times
`fusion-node --duration 120 | head -1` (how long a closed stdout takes to end the run).

Usage: tools/.venv/bin/python tools/bench_streaming.py [--node PATH] [--seconds-1hz N] [--seconds-100hz N]
"""
import argparse, os, pty, select, socket, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def sample_line(t):
    return f'{t:.4f},0.01,0,0,0,0,9.81,2e-5,0,-4e-5\n'


def measure(node, rate_hz, seconds, terminal):
    cmd = [str(node), '--config', str(ROOT / 'Pipelines' / 'live-lines.yaml')]
    env = dict(os.environ, PUBLISH=f'tcp://127.0.0.1:{free_port()}')
    if terminal:
        master, slave = pty.openpty()
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=slave, stderr=subprocess.DEVNULL, env=env)
        os.close(slave)
        out_fd = master
    else:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        out_fd = p.stdout.fileno()
    latencies, pending, buffer = [], [], b''
    n = int(seconds * rate_hz)
    start = time.monotonic()
    t0 = 1_700_000_000.0
    for i in range(n + 1):
        due = start + i / rate_hz
        while True:
            now = time.monotonic()
            timeout = max(0.0, due - now)
            ready, _, _ = select.select([out_fd], [], [], timeout)
            if ready:
                chunk = os.read(out_fd, 65536)
                arrived = time.monotonic()
                buffer += chunk
                while b'\n' in buffer:
                    line, buffer = buffer.split(b'\n', 1)
                    if b'"heading"' in line and pending:
                        latencies.append(arrived - pending.pop(0))
            if time.monotonic() >= due:
                break
        if i < n:
            p.stdin.write(sample_line(t0 + i / rate_hz).encode())
            p.stdin.flush()
            pending.append(time.monotonic())
    p.stdin.close()
    p.wait(timeout=30)
    if terminal:
        os.close(master)
    if len(latencies) < 2:
        return len(latencies), float('nan'), float('nan'), float('nan')
    latencies = sorted(latencies[1:])          # the first line also pays for start-up
    def pct(q):
        return latencies[min(len(latencies) - 1, int(q * (len(latencies) - 1)))] * 1000
    return len(latencies), pct(0.5), pct(0.99), latencies[-1] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--node', default=None)
    ap.add_argument('--skip-head', action='store_true', help='leave out the head -1 timing')
    ap.add_argument('--seconds-1hz', type=float, default=10)
    ap.add_argument('--seconds-100hz', type=float, default=10)
    a = ap.parse_args()
    node = a.node or Path(subprocess.run(['swift', 'build', '-c', 'release', '--show-bin-path'], cwd=ROOT,
                                         capture_output=True, text=True, check=True).stdout.strip()) / 'fusion-node'
    for rate, seconds in [(1, a.seconds_1hz), (100, a.seconds_100hz)]:
        for terminal in (False, True):
            count, p50, p99, worst = measure(node, rate, seconds, terminal)
            print(f'{rate:>3} Hz into a {"terminal" if terminal else "pipe    "}: {count} lines, line to stdout '
                  f'p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {worst:.2f} ms')
    if a.skip_head:
        return
    started = time.monotonic()
    subprocess.run(f'"{node}" --duration 120 | head -1 > /dev/null', shell=True, check=True)
    print(f'fusion-node --duration 120 | head -1: ended after {time.monotonic() - started:.3f} s')


if __name__ == '__main__':
    main()
