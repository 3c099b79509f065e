"""`fusion-node fleet` (and `python -m gyrocompass.fleet`): the command line of run, compare and
health."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .bags import FleetError
from .compare import compare
from .health import health
from .run import run

def _parse_set(values):
    options = {}
    for item in values or []:
        if '=' not in item:
            raise FleetError(f'--set {item}: expected STAGE.SETTING=VALUE')
        key, value = item.split('=', 1)
        options[key.strip()] = value.strip()
    return options


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.environ.get('GYROCOMPASS_FLEET_PROG', 'fusion-node fleet')
    if argv[:1] == ['compare']:
        p = argparse.ArgumentParser(prog=f'{prog} compare', description=compare.__doc__.split('\n\n')[0])
        p.add_argument('a', help='the first run\'s output directory')
        p.add_argument('b', help='the second run\'s output directory')
        p.add_argument('--by', default='heading', choices=('heading', 'bound', 'trusted'))
        p.add_argument('--top', type=int, default=20, help='bags to print (default 20)')
        p.add_argument('--truth', help='truth CSV per bag: a path pattern with {stem}, {prefix} (the stem up to its '
                       'first _), {bag}, {dir}, relative to the bag\'s directory (default: STEM.truth.csv[.gz] '
                       'beside the bag)')
        p.add_argument('--robot', help='regex naming the robot (group) in a bag\'s path')
        p.add_argument('-o', '--output', help='the table (default B/compare.csv)')
        a = p.parse_args(argv[1:])
        compare(a.a, a.b, by=a.by, top=a.top, truth=a.truth, robot=a.robot, table=a.output)
        return 0
    if argv[:1] == ['health']:
        p = argparse.ArgumentParser(prog=f'{prog} health', description=health.__doc__.split('\n\n')[0])
        p.add_argument('directory', help='a fleet run\'s output directory')
        p.add_argument('--robot', help='regex naming the robot in a bag\'s path (default: its first directory)')
        p.add_argument('-o', '--output', help='the table (default DIRECTORY/health.csv)')
        a = p.parse_args(argv[1:])
        _, jumps = health(a.directory, robot=a.robot, table=a.output)
        return 0
    p = argparse.ArgumentParser(
        prog=prog, description='Replay every bag on a Dask cluster (local by default) and write per bag its '
        'outputs and a summary row; `compare A B` and `health OUT` read the results.',
        epilog='exit codes: 0 every bag replayed or up to date, 1 failed, 2 usage error, 3 some bags failed '
        '(each a row with its error in OUTPUT/summary.csv)')
    p.add_argument('bags', nargs='+', help='directories, globs, bag files, or text files listing bags')
    p.add_argument('-o', '--output', required=True, help='output directory')
    p.add_argument('--settings', help='a YAML file of replay options (calibration, filter, mag_rotation, '
                   'STAGE.SETTING: value, ...), as gyrocompass.replay takes them')
    p.add_argument('--set', action='append', metavar='STAGE.SETTING=VALUE', help='one setting (repeatable)')
    p.add_argument('--no-calibration', action='store_true', help='replay --no-calibration')
    p.add_argument('--calibration', help='a calibration file applied to every bag')
    p.add_argument('--filter', choices=('kalman', 'complementary'))
    p.add_argument('--mag-rotation')
    p.add_argument('--imu-rotation')
    p.add_argument('--outputs', default='orientation,accuracy',
                   help='orientation, accuracy, both (comma-separated) or none (default both)')
    p.add_argument('--format', default='auto', choices=('auto', 'csv', 'parquet'),
                   help='per-bag outputs as CSV or Parquet (auto: Parquet when pyarrow is installed)')
    p.add_argument('--gnss', choices=('auto',),
                   help='auto: each bag\'s GNSS velocity topic (TwistWithCovarianceStamped), '
                   'where it has one, aids its replay (as replay --velocity-topic)')
    p.add_argument('--workers', type=int, help='local worker processes (default: one per core)')
    p.add_argument('--scheduler', help='a Dask scheduler to run on (tcp://HOST:8786) instead of a local cluster')
    p.add_argument('--robot', help='regex naming the robot in a bag\'s path (default: its first directory)')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    a = p.parse_args(argv)
    options = {}
    if a.settings:
        try:
            import yaml  # dask's own dependency
            loaded = yaml.safe_load(Path(a.settings).read_text()) or {}
        except (OSError, ValueError) as e:
            raise FleetError(f'--settings {a.settings}: {e}') from None
        if not isinstance(loaded, dict):
            raise FleetError(f'--settings {a.settings}: expected a mapping of options')
        options.update(loaded)
    for flag, key in (('filter', 'filter'), ('mag_rotation', 'mag_rotation'), ('imu_rotation', 'imu_rotation'),
                      ('calibration', 'calibration')):
        if getattr(a, flag):
            options[key] = getattr(a, flag)
    if a.no_calibration:
        options['calibration'] = 'none'
    options.update(_parse_set(a.set))
    outputs = [] if a.outputs == 'none' else [o.strip() for o in a.outputs.split(',') if o.strip()]
    rows = run(a.bags, a.output, options=options, outputs=outputs, format=a.format, scheduler=a.scheduler,
               workers=a.workers, robot=a.robot, gnss=a.gnss, progress=not a.quiet)
    failed = [r for r in rows if r['status'] == 'failed']
    fresh = sum(r['status'] == 'replayed' for r in rows)
    current = sum(r['status'] == 'up to date' for r in rows)
    if fresh == 0 and not failed:
        print(f'fleet: nothing to do: all {_bags(len(rows))} are up to date (same bags, options and version); '
              f'summary in {Path(a.output) / "summary.csv"}', file=sys.stderr)
    else:
        print(f'fleet: {_bags(len(rows))}: {fresh} replayed, {current} up to date, {len(failed)} failed; '
              f'summary in {Path(a.output) / "summary.csv"}', file=sys.stderr)
    for r in failed[:20]:
        print(f'fleet: {r["bag"]}: {r["error"]}', file=sys.stderr)
    return 3 if failed else 0


def _bags(n: int) -> str:
    return f'{n} bag' if n == 1 else f'{n} bags'


def _entry() -> int:
    try:
        return main()
    except FleetError as e:
        print(f'fleet: {e}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('fleet: interrupted; bags finished so far keep their outputs and rows, a re-run does the rest',
              file=sys.stderr)
        return 130
