#!/usr/bin/env python3
"""A simulated fleet's recordings: ROBOTS robots, BAGS bags in all (robotNN/day-DDD.mcap, each with its
truth beside it as day-DDD.truth.csv), written by the seeded simulator through fusion-node's record stage.

Each robot is a hand-held device with its own hard iron; on every third robot a magnet is mounted part-way
through its days (its hard iron jumps by MAGNET from that bag on), which `fusion-node fleet health` should
list. Scenarios and seeds vary from bag to bag; the same arguments write the same bytes.

  tools/fleet_bags.py DIR [--bags 200] [--robots 8] [--seconds 30] [--node BIN] [--rate 100]
"""
import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ('default', 'tour', 'figure_eight', 'walking')
MAGNET_UT = (18.0, -12.0, 6.0)
PER_PROCESS = 25  # simulator + record pairs run by one fusion-node


def plan(bags, robots, seconds):
    """(robot, day, scenario, seed, hard iron, magnet mounted) per bag, robots taking turns."""
    out = []
    for i in range(bags):
        robot, day = i % robots, i // robots
        days = (bags - robot + robots - 1) // robots
        base = ((robot * 7) % 41 - 20.0, (robot * 13) % 37 - 18.0, (robot * 5) % 23 - 11.0)
        mounted = robot % 3 == 1 and day >= days // 2
        hard = tuple(b + (m if mounted else 0.0) for b, m in zip(base, MAGNET_UT))
        out.append((robot, day, SCENARIOS[(i * 5 + robot) % len(SCENARIOS)], 1000 + i, hard, mounted))
    return out


def config(entries, directory, seconds, rate):
    lines = ['stages:']
    for robot, day, scenario, seed, hard, _ in entries:
        stem = directory / f'robot{robot:02d}' / f'day-{day:03d}'
        stem.parent.mkdir(parents=True, exist_ok=True)
        name = f'r{robot}d{day}'
        lines += [f'  sim_{name}:', '    type: simulator', f'    scenario: {scenario}', f'    seed: {seed}',
                  f'    rate_hz: {rate}', f'    duration_s: {seconds}', '    realtime: false',
                  f'    hard_iron_ut: [{hard[0]}, {hard[1]}, {hard[2]}]', f'    truth_path: {stem}.truth.csv',
                  f'  rec_{name}:', '    type: record', f'    inputs: [sim_{name}]', f'    path: {stem}.mcap',
                  '    topics: [imu/data_raw, imu/mag]']
    return '\n'.join(lines) + '\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('directory', type=Path)
    ap.add_argument('--bags', type=int, default=200)
    ap.add_argument('--robots', type=int, default=8)
    ap.add_argument('--seconds', type=float, default=30.0)
    ap.add_argument('--rate', type=float, default=100.0)
    ap.add_argument('--node', default=str(ROOT / '.build' / 'release' / 'fusion-node'))
    a = ap.parse_args()
    if a.bags < 1 or a.robots < 1:
        sys.exit('fleet_bags: --bags and --robots must be at least 1')
    a.directory.mkdir(parents=True, exist_ok=True)
    entries = plan(a.bags, a.robots, a.seconds)
    for start in range(0, len(entries), PER_PROCESS):
        path = a.directory / f'.fleet-{start}.yaml'
        path.write_text(config(entries[start:start + PER_PROCESS], a.directory.resolve(), a.seconds, a.rate))
        r = subprocess.run([a.node, '--config', str(path)], capture_output=True, text=True)
        path.unlink()
        if r.returncode != 0:
            sys.exit(f'fleet_bags: fusion-node exit {r.returncode}: {r.stderr[-2000:]}')
    with open(a.directory / 'fleet.csv', 'w') as f:
        f.write('bag,robot,scenario,seed,hard_iron_x_ut,hard_iron_y_ut,hard_iron_z_ut,magnet_mounted\n')
        for robot, day, scenario, seed, hard, mounted in entries:
            f.write(f'robot{robot:02d}/day-{day:03d},robot{robot:02d},{scenario},{seed},{hard[0]},{hard[1]},'
                    f'{hard[2]},{int(mounted)}\n')
    print(f'fleet_bags: {len(entries)} bags of {a.seconds:g} s for {a.robots} robots in {a.directory}')


if __name__ == '__main__':
    main()
