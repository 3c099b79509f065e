"""Every command README.md shows runs in a test exactly as written. tools/readme_commands.py extracts
them (each ```sh block's lines, comments off); this file runs each block as a reader would type it, in a
scratch directory that holds the checkout's `tools`, `Pipelines` and `.build` (so nothing lands in the
checkout), with `.build/release` on PATH as the README says. A command no test here runs fails the first
test, unless it is in NOT_RUN with the reason.
"""
import os, re, shutil, subprocess, sys, time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import readme_commands  # noqa: E402
from test_package import chroot, debian_root  # noqa: E402,F401  (fixture: needs root and mmdebstrap)

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / 'tools' / '.venv' / 'bin'

# Commands that cannot run here, and why.
NOT_RUN = {
    'tools/test.sh': 'the test suite this file is part of (CI runs exactly it)',
    'sudo systemctl enable --now gyrocompass@robot':
        'needs a booted systemd (CI runs in a container without one); test_package.py verifies the unit with '
        'systemd-analyze and runs its ExecStart as the service would',
    'journalctl -u gyrocompass@robot -f': 'follows the journal of that running service: needs a booted systemd',
}
# Run on this machine, block by block (README line of the block's first command).
ON_HOST = ['tools/run.sh', 'export PATH="$PWD/.build/release:$PATH"', 'fusion-node --version',
           'fusion-node --duration 10', 'fusion-node --config Pipelines/simulate-bag.yaml',
           'fusion-node replay sim.mcap', 'fusion-node replay sim.mcap --csv out.csv --accuracy-csv acc.csv',
           'fusion-node report sim.mcap --truth sim-truth.csv -o report.html', 'fusion-node bag info sim.mcap',
           'export CYCLONEDDS_URI=file://$PWD/Pipelines/cyclonedds-loopback.xml',
           'fusion-node --config Pipelines/ros2-simulated-sensor.yaml &',
           'fusion-node --config Pipelines/ros2-imu-filter.yaml &', 'fusion-node ros2 echo /heading --count 3',
           'kill %1 %2', 'python3 sub.py &',
           'fusion-node replay sim.mcap --publish tcp://127.0.0.1:5601 --encoding json --wait-for-subscribers 1']
IN_A_TERMINAL = ['fusion-node --watch']
IN_A_DEBIAN_ROOT = ['tools/package.sh', 'sudo apt install ./.build/package/gyrocompass_*.deb', 'fusion-node watch']


def test_every_readme_command_is_run_by_a_test_or_says_why_not():
    commands = [c for _, _, c in readme_commands.commands()]
    assert len(commands) >= 20
    known = set(NOT_RUN) | set(ON_HOST) | set(IN_A_TERMINAL) | set(IN_A_DEBIAN_ROOT)
    assert [c for c in commands if c not in known] == [], 'README commands no test runs'
    assert sorted(known - set(commands)) == [], 'commands listed here that README.md no longer shows'


def test_the_extractor_takes_comments_off_but_not_what_quotes_hold():
    text = "x\n```sh\nfoo --a 'b # c'   # a comment\n# a whole-line comment\n\nbar#baz\n```\n```yaml\nk: v\n```\n"
    assert [c for _, _, c in readme_commands.commands(text)] == ["foo --a 'b # c'", 'bar#baz']


@pytest.fixture(scope='module')
def reader(tmp_path_factory):
    """A scratch directory laid out like the checkout for the README's relative paths."""
    d = tmp_path_factory.mktemp('readme')
    for name in ['tools', 'Pipelines', '.build']:
        (d / name).symlink_to(ROOT / name)
    return d


def block_of(command):
    """The README block holding `command`, as (its commands in order)."""
    found = [b for _, b, c in readme_commands.commands() if c == command]
    assert found, command
    return [c for _, b, c in readme_commands.commands() if b == found[0]]


def run_lines(reader, lines, timeout, extra_path=()):
    env = {**os.environ, 'PATH': os.pathsep.join([str(reader / '.build' / 'release'), *map(str, extra_path),
                                                  os.environ['PATH']])}
    env.pop('CYCLONEDDS_URI', None)          # the README's block sets it where it needs it
    script = 'set -e\n' + '\n'.join(lines) + '\n'
    return subprocess.run(['bash', '-c', script], cwd=reader, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_readme_commands_run_as_written(reader):
    """From source to a replayed recording, ROS 2 and a Python subscriber: each block as one script."""
    # Building and running (tools/test.sh is this suite).
    r = run_lines(reader, ['tools/run.sh'], timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r'heading=\d+\.\d \(\w+\) \+-\d', r.stdout), r.stdout[-2000:]
    assert 'accepted' in r.stderr and 'RMSE' in r.stderr, r.stderr[-2000:]
    r = run_lines(reader, block_of('fusion-node --version'), timeout=60)
    assert r.returncode == 0 and r.stdout.startswith('fusion-node '), r.stderr
    r = run_lines(reader, ['fusion-node --duration 10'], timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    # A recording: made, replayed, reported, looked into.
    lines = block_of('fusion-node replay sim.mcap')
    r = run_lines(reader, lines, timeout=600)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    for made in ['sim.mcap', 'sim-truth.csv', 'out.csv', 'acc.csv', 'report.html']:
        assert (reader / made).exists(), made
    # ROS 2: the simulated sensor, the drop-in filter and the echo, on loopback.
    r = run_lines(reader, block_of('fusion-node ros2 echo /heading --count 3'), timeout=180)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert r.stdout.count('"magnetic_heading"') == 3, r.stdout[-2000:]
    # Python: sub.py as the README gives it, then the replay it subscribes to.
    # The subscriber (the library's snippet is tested by tools/tests/test_python_package.py's cases).
    python = [b for b in readme_commands.blocks(readme_commands.README.read_text())
              if b[0] == 'python' and any('import zmq' in line for line in b[2])]
    assert len(python) == 1
    (reader / 'sub.py').write_text('\n'.join(python[0][2]) + '\n')
    r = run_lines(reader, block_of('python3 sub.py &') + ['wait'], timeout=300, extra_path=[VENV_BIN])
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    rows = [line for line in r.stdout.splitlines() if re.match(r'^\d+ [\d.]+ ', line)]
    assert len(rows) > 1000, r.stdout[-2000:]


def test_the_readme_watch_runs_in_a_terminal_and_q_quits(reader):
    session = f'gc-readme-{os.getpid()}'
    done = reader / 'watch-exit'
    path = f'{reader / ".build" / "release"}:{os.environ["PATH"]}'
    subprocess.run(['tmux', 'new-session', '-d', '-s', session, '-x', '120', '-y', '32', '-c', str(reader),
                    f'PATH="{path}" {IN_A_TERMINAL[0]}; echo $? > {done}; sleep 30'], check=True)
    try:
        deadline, text = time.time() + 60, ''
        while time.time() < deadline and not re.search(r'heading \d+\.\d deg', text):
            time.sleep(0.3)
            text = subprocess.run(['tmux', 'capture-pane', '-p', '-t', session], capture_output=True,
                                  text=True).stdout
        assert re.search(r'heading \d+\.\d deg', text), text
        subprocess.run(['tmux', 'send-keys', '-t', session, 'q'], check=True)
        deadline = time.time() + 15
        while time.time() < deadline and not done.exists():
            time.sleep(0.2)
        assert done.exists() and done.read_text().strip() == '0'
    finally:
        subprocess.run(['tmux', 'kill-session', '-t', session], capture_output=True)


def test_the_readme_install_commands_run_as_written(reader, debian_root):
    """The package built as the README says, installed with apt in a clean Debian root (as root there;
    `sudo` is a pass-through, the root being root already), and `fusion-node watch` run from it: with
    nothing published yet it names the endpoint it waits for, and Ctrl-C ends it (exit 130)."""
    build, install, watch = IN_A_DEBIAN_ROOT
    r = run_lines(reader, [build], timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    deb = Path(r.stdout.strip().splitlines()[-1])
    assert deb.parent == ROOT / '.build' / 'package' and sorted(deb.parent.glob('gyrocompass_*.deb')) == [deb]
    home = debian_root / 'root'
    (home / '.build' / 'package').mkdir(parents=True, exist_ok=True)
    shutil.copy(deb, home / '.build' / 'package' / deb.name)
    sudo = debian_root / 'usr' / 'bin' / 'sudo'
    sudo.write_text('#!/bin/sh\nexec "$@"\n')
    sudo.chmod(0o755)
    r = chroot(debian_root, 'apt-get update -qq', timeout=600)   # a machine's package lists, as any has
    assert r.returncode == 0, r.stderr
    r = chroot(debian_root, f'cd /root && {install}', timeout=900, input='Y\n')   # the reader answers yes
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    r = chroot(debian_root, f'cd /root && timeout --preserve-status -s INT 3 {watch}; echo "exit $?"', timeout=60)
    assert 'tcp://127.0.0.1:5600' in r.stdout + r.stderr and 'exit 130' in r.stdout, (r.stdout, r.stderr)
