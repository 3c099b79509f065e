#!/usr/bin/env python3
"""What a subscriber that never reads costs a replay on a `publish` endpoint (on_slow: drop, the
default). Records a simulated bag once, then times, in interleaved rounds, `fusion-node replay BAG
--publish tcp://...` with nobody subscribed, with a subscriber that subscribes to everything and never
reads (smallest queues), and with one that reads everything. Each time is the replay's own ("replay of
BAG took S s": process start-up and waiting for the subscriber left out); the order of the three
alternates between rounds, so a drift of the machine's speed does not favour one. Prints each time,
the medians, and the ratios to the run without a subscriber. `--cpus 0` runs every replay on one core
(taskset), which shows the work a subscriber adds apart from how two cores share the stages' threads.

Usage: tools/.venv/bin/python tools/bench_slow_subscriber.py [--node PATH] [--seconds S] [--rounds R]
       [--cpus LIST]
"""
import argparse, re, resource, socket, statistics, subprocess, sys, tempfile, threading
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def record_bag(node, seconds, directory):
    """A simulated run at 285 Hz (the BROAD rate), recorded unpaced."""
    bag = directory / 'simulated'
    config = directory / 'record.yaml'
    config.write_text(f"""
stages:
  sim:
    type: simulator
    rate_hz: 285
    duration_s: {seconds}
    realtime: false
  record:
    type: record
    inputs: [sim]
    topics: [imu/data_raw, imu/mag]
    path: {bag}
""")
    r = subprocess.run([str(node), '--config', str(config)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f'recording the simulated bag failed ({r.returncode}): {r.stderr[-2000:]}')
    return bag


def replay(node, bag, subscriber, cpus=None):
    """Seconds for one replay publishing on a fresh endpoint; `subscriber` is None, 'never' or 'reads'."""
    endpoint = f'tcp://127.0.0.1:{free_port()}'
    ctx = zmq.Context()
    sub, reader, stop = None, None, threading.Event()
    received = [0]
    if subscriber:
        sub = ctx.socket(zmq.SUB)
        if subscriber == 'never':
            sub.setsockopt(zmq.RCVHWM, 1)
            sub.setsockopt(zmq.RCVBUF, 4096)
        sub.setsockopt(zmq.SUBSCRIBE, b'')
        sub.connect(endpoint)
        if subscriber == 'reads':
            def read():
                while not stop.is_set():
                    if sub.poll(100):
                        sub.recv()
                        received[0] += 1
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
    cmd = [str(node), 'replay', str(bag), '--publish', endpoint, '--on-slow', 'drop']  # what is measured
    if cpus is not None:
        cmd = ['taskset', '-c', cpus] + cmd
    if subscriber:
        cmd += ['--wait-for-subscribers', '1']
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    stop.set()
    if reader:
        reader.join()
    if sub:
        sub.close()
    ctx.term()
    if r.returncode != 0:
        sys.exit(f'replay failed ({r.returncode}): {r.stderr[-2000:]}')
    took = re.search(r'replay of .* took ([0-9.]+) s', r.stderr)
    if not took:
        sys.exit(f'the replay did not say how long it took: {r.stderr[-2000:]}')
    seconds = float(took.group(1))
    # Episodes: of a queue one of several subscribers shared a message with, or of a sole taker's queue.
    missed = (re.search(r"a slow subscriber's queue of \d+ filled (\d+) time\(s\)", r.stderr)
              or re.search(r"only subscriber they were for had a full queue of \d+ \(it filled (\d+) time\(s\)",
                           r.stderr))
    return seconds, cpu, int(missed.group(1)) if missed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--node', default=str(ROOT / '.build' / 'release' / 'fusion-node'))
    ap.add_argument('--seconds', type=float, default=3600, help='simulated seconds in the bag (default 3600)')
    ap.add_argument('--rounds', type=int, default=9)
    ap.add_argument('--cpus', help='run every replay on these cores only (taskset -c LIST), e.g. 0')
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bag = record_bag(args.node, args.seconds, Path(tmp))
        times = {'none': [], 'never': [], 'reads': []}
        cpus = {kind: [] for kind in times}
        for round in range(1, args.rounds + 1):
            line = []
            kinds = list(times) if round % 2 else list(reversed(times))
            for kind in kinds:
                seconds, cpu, missed = replay(args.node, bag, None if kind == 'none' else kind, args.cpus)
                times[kind].append(seconds)
                cpus[kind].append(cpu)
                behind = f', fell behind {missed} time(s))' if missed else ')'
                line.append(f'{kind} {seconds:.2f} s (CPU {cpu:.2f} s{behind}')
            print(f'round {round}: ' + ', '.join(line), flush=True)
        base = statistics.median(times['none'])
        print(f'median: no subscriber {base:.2f} s; never reads {statistics.median(times["never"]):.2f} s '
              f'({statistics.median(times["never"]) / base:.2f} x); reads everything '
              f'{statistics.median(times["reads"]):.2f} s ({statistics.median(times["reads"]) / base:.2f} x)')
        ratios = [n / b for n, b in zip(times['never'], times['none'])]
        print(f'never reads / no subscriber, per round: {", ".join(f"{r:.2f}" for r in ratios)}')
        cpu_ratios = [n / b for n, b in zip(cpus['never'], cpus['none'])]
        print(f'CPU time of the replay process, never reads / no subscriber: median '
              f'{statistics.median(cpu_ratios):.2f} ({", ".join(f"{r:.2f}" for r in cpu_ratios)})')


if __name__ == '__main__':
    main()
