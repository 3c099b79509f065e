#!/usr/bin/env python3
"""Start-up time of the packaged binary (static Swift runtime, stripped) next to the build tree's release
binary (shared Swift runtime from the toolchain): `fusion-node --version`, run alternately, median of N.

Usage: tools/.venv/bin/python tools/bench_startup.py [--runs 20] [--deb PATH]
Without --deb it runs tools/package.sh first; the build tree's binary is .build/release/fusion-node.
"""
import argparse, statistics, subprocess, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=20)
    parser.add_argument('--deb', type=Path, help='a package tools/package.sh built (default: build one)')
    args = parser.parse_args()
    deb = args.deb or Path(subprocess.run(['bash', str(ROOT / 'tools/package.sh')], check=True,
                                          capture_output=True, text=True).stdout.split()[-1])
    subprocess.run(['swift', 'build', '-c', 'release', '--product', 'fusion-node'], cwd=ROOT, check=True,
                   capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(['dpkg-deb', '-x', str(deb), tmp], check=True)
        binaries = {'packaged (static runtime)': Path(tmp) / 'usr/bin/fusion-node',
                    'build tree (shared runtime)': ROOT / '.build/release/fusion-node'}
        times = {name: [] for name in binaries}
        for name, path in binaries.items():  # one warm-up each: the page cache, not the binary, is timed first
            subprocess.run([str(path), '--version'], check=True, capture_output=True)
        for _ in range(args.runs):
            for name, path in binaries.items():
                start = time.perf_counter()
                subprocess.run([str(path), '--version'], check=True, capture_output=True)
                times[name].append((time.perf_counter() - start) * 1000)
        print(f'fusion-node --version, {args.runs} runs each, alternating ({deb.name}, '
              f'{deb.stat().st_size / 1e6:.1f} MB)')
        for name, path in binaries.items():
            t = sorted(times[name])
            print(f'  {name:28s} median {statistics.median(t):6.1f} ms   min {t[0]:6.1f}   max {t[-1]:6.1f}   '
                  f'binary {path.stat().st_size / 1e6:.1f} MB')
        ratio = statistics.median(times['packaged (static runtime)']) / statistics.median(
            times['build tree (shared runtime)'])
        print(f'  packaged / build tree: {ratio:.2f}')


if __name__ == '__main__':
    main()
