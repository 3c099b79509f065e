#!/usr/bin/env python3
"""Throughput, GyroCompass against its peers on the same data in the same run.

1. Filters: `fusion-node bench filter BAG` decodes the bag's samples into memory and times the filter
   (release build, one core, best of N); VQF's C++ `updateBatch` (pip `vqf`) runs on the same samples,
   decoded here with `rosbags`. The runs are interleaved so machine noise hits both alike.
2. Bag reading: `fusion-node bench bag BAG` (read + CDR-decode every message) against the Python `mcap`
   reader with `rosbags`' CDR deserializer on the same file.

Usage: tools/.venv/bin/python tools/bench_filters.py [BAG] [--rounds 5] [--no-build]
(BAG defaults to the first BROAD trial in ../shared/data/broad/bags.)
"""
import argparse, re, subprocess, sys, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_benchmark import fusion_node, read_bag  # noqa: E402


def node_rate(node, args, key):
    out = subprocess.run([str(node), 'bench', *args], check=True, capture_output=True, text=True).stdout
    return float(re.search(key + r'=([0-9.]+)', out).group(1))


def vqf_rate(gyr, acc, mag, ts, repeats):
    import vqf
    best = float('inf')
    for _ in range(repeats):
        v = vqf.VQF(ts)
        t0 = time.perf_counter()
        v.updateBatch(gyr, acc, mag)
        best = min(best, time.perf_counter() - t0)
    return len(gyr) / best


def python_bag_rate(mcap_file, repeats):
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore
    store = get_typestore(Stores.ROS2_HUMBLE)
    best, count = float('inf'), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        count = 0
        with open(mcap_file, 'rb') as f:
            for schema, channel, message in make_reader(f).iter_messages():
                store.deserialize_cdr(message.data, schema.name)
                count += 1
        best = min(best, time.perf_counter() - t0)
    return count / best, count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('bag', nargs='?')
    ap.add_argument('--rounds', type=int, default=5, help='interleaved rounds (each best of 5 runs)')
    ap.add_argument('--no-build', action='store_true')
    args = ap.parse_args()
    bag = Path(args.bag) if args.bag else sorted((ROOT.parent / 'shared' / 'data' / 'broad' / 'bags').iterdir())[0]
    node = fusion_node(not args.no_build)
    t, gyr, acc, mag = read_bag(bag)
    ts = float(np.median(np.diff(t)))

    rates = {'kalman': [], 'complementary': [], 'vqf': []}
    for _ in range(args.rounds):
        rates['kalman'].append(node_rate(node, ['filter', str(bag), '--filter', 'kalman', '--repeat', '5'], 'samples_per_second'))
        rates['complementary'].append(node_rate(node, ['filter', str(bag), '--filter', 'complementary', '--repeat', '5'], 'samples_per_second'))
        rates['vqf'].append(vqf_rate(gyr, acc, mag, ts, 5))
    best = {k: max(v) for k, v in rates.items()}
    print(f'Filter throughput on {bag.name} ({len(t)} samples), best of {args.rounds} interleaved rounds x 5 runs, one core:\n')
    print('| filter | samples/s | vs VQF updateBatch |')
    print('|---|---:|---:|')
    print(f'| GyroCompass Kalman (release) | {best["kalman"]:,.0f} | {best["kalman"] / best["vqf"]:.2f}x |')
    print(f'| GyroCompass complementary (release) | {best["complementary"]:,.0f} | {best["complementary"] / best["vqf"]:.2f}x |')
    print(f'| VQF 9D updateBatch (pip vqf, C++) | {best["vqf"]:,.0f} | 1.00x |')

    mcap_file = next(bag.glob('*.mcap')) if bag.is_dir() else bag
    ours = max(node_rate(node, ['bag', str(bag), '--repeat', '3'], 'messages_per_second') for _ in range(args.rounds))
    theirs, count = python_bag_rate(mcap_file, 3)
    print(f'\nBag read + CDR decode of every message ({count} messages, zstd chunks):\n')
    print('| reader | messages/s | ratio |')
    print('|---|---:|---:|')
    print(f'| GyroCompass (fusion-node bench bag) | {ours:,.0f} | {ours / theirs:.1f}x |')
    print(f'| Python mcap reader + rosbags deserializer | {theirs:,.0f} | 1.0x |')


if __name__ == '__main__':
    main()
