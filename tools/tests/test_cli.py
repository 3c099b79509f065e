"""The command line a new user meets, through the real fusion-node binary: help everywhere, errors that
name the cause (and the nearest valid word), one table of exit codes, nothing silent, outputs left alone
by a run that fails before it starts, live output that streams, the README's generated reference.
"""
import json, math, os, re, shutil, signal, subprocess, sys, time
from pathlib import Path

import pytest
import zmq
from rosbags.rosbag2 import StoragePlugin

from test_bag_interop import make_messages, node, write_rosbags  # noqa: F401  (fixture)
from test_pipeline_interop import free_port

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [['replay'], ['calibrate'], ['bag'], ['bag', 'info'], ['bag', 'echo'], ['echo'], ['bench'], ['bench', 'filter'],
            ['bench', 'bag'], ['bench', 'pipeline'], ['bench', 'curve'], ['bag', 'convert'], ['stages'], ['completion'],
            ['keygen'], ['watch'], ['report'], ['--config']]


def run(node, *args, timeout=60, **kw):
    return subprocess.run([str(node), *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp('clibags') / 'input.mcap'
    write_rosbags(path.with_suffix(''), make_messages(n=600, seed=5), StoragePlugin.MCAP, zstd_chunks=True)
    return path.with_suffix('')


@pytest.mark.parametrize('command', COMMANDS, ids=' '.join)
def test_every_command_answers_help_with_usage_and_exit_0(node, command):
    for flag in ['--help', '-h']:
        r = run(node, *command, flag)
        assert r.returncode == 0, r.stderr
        assert 'usage: fusion-node' in r.stdout
    if len(command) == 2 or command[0] in ('replay', 'echo', 'stages', 'completion', 'keygen', 'watch', 'report',
                                           '--config'):
        text = run(node, *command, '--help').stdout
        assert 'options:' in text or 'commands:' in text
        assert run(node, 'help', *command).stdout == text


def test_help_texts_show_defaults_and_examples(node):
    text = run(node, 'replay', '--help').stdout
    assert '(default: kalman)' in text and 'examples:' in text and '--accuracy-csv OUT.csv' in text


@pytest.mark.parametrize('args, words', [
    (['repaly', 'x.mcap', '--csv', 'x.csv'], ["unknown command 'repaly'", "did you mean 'replay'"]),
    (['replay', 'x.mcap', '--cvs', 'x.csv'], ["unknown option '--cvs'", "did you mean '--csv'"]),
    (['bag', 'inof', 'x'], ["unknown bag command 'inof'", "did you mean 'info'"]),
    (['echo', '127.0.0.1:5806'], ['needs a transport', "did you mean 'tcp://127.0.0.1:5806'"]),
    (['replay', 'x.mcap', '--filter', 'kalmann'], ['--filter kalmann', "did you mean 'kalman'"]),
    (['stages', 'fusoin'], ["unknown stage type 'fusoin'", "did you mean 'fusion'"]),
    (['completion', 'fish'], ["'fish'"]),
    (['report', 'x.mcap', '-o', 'r.html', '--filtr', 'kalman'], ["unknown option '--filtr'", "did you mean '--filter'"]),
    (['watch', '127.0.0.1:5600'], ["did you mean 'tcp://127.0.0.1:5600'"]),
    (['bag', 'convert', 'a', 'b', '--storage', 'sqlite'], ["--storage expects mcap or sqlite3"]),
    (['bench', 'curv'], ["did you mean 'curve'"]),
    (['bench', 'smooth', '--hours', '0'], ['--hours expects a number from 0.001 to 100', 'bench smooth --help']),
    (['bench', 'smooth', '--hourz', '1'], ["did you mean '--hours'"]),
    (['replay', 'x.mcap', '--smoth'], ["did you mean '--smooth'"]),
    (['replay', 'x.mcap', '--publish', 'tcp://127.0.0.1:5999', '--on-slow', 'fast'], ['must be one of drop, block']),
    (['--config', 'x.yaml', '--resume'], ['--resume applies to --stage']),
    (['--config', 'x.yaml', '--max-restarts', '2'], ['--max-restarts applies to --supervise']),
    (['replay', 'x.mcap', '--mag-rotation', 'autoo'], ['--mag-rotation autoo: not a rotation name', "did you mean 'auto'"]),
    (['report', 'x.mcap', '-o', 'r.html', '--imu-rotation', 'yaw90'], ["did you mean 'yaw_90'"]),
    (['replay', 'x.mcap', '--imu-rotation', 'auto'], ['auto finds the magnetometer', '--mag-rotation auto']),
    (['report', 'x.mcap', '-o', 'r.html', '--compare-labl', 'x'], ["did you mean '--compare-label'"]),
    (['replay', 'x.mcap', '--overwrit'], ["did you mean '--overwrite'"]),
])
def test_usage_errors_name_the_word_and_the_nearest_valid_one_exit_2(node, args, words):
    r = run(node, *args)
    assert r.returncode == 2, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_config_errors_say_why(node, tmp_path):
    missing = run(node, '--config', tmp_path / 'nonexist.yaml')
    assert missing.returncode == 2 and 'No such file or directory' in missing.stderr
    folder = run(node, '--config', tmp_path)
    assert folder.returncode == 2 and 'is a directory' in folder.stderr
    pipe = tmp_path / 'p.yaml'
    pipe.write_text('stages:\n  s:\n    type: simulator\n    duration_s: 1\n    realtime: false\n'
                    '  out:\n    type: stdout\n    inputs: [s]\n    topics: [headings]\n')
    r = run(node, '--config', pipe)
    assert r.returncode == 2 and 'p.yaml:9:' in r.stderr and "'headings'" in r.stderr
    assert 'no stage upstream publishes' in r.stderr and 'imu/data_raw' in r.stderr


def test_config_overrides_are_checked_like_the_file_and_named(node, tmp_path):
    pipe = ROOT / 'Pipelines' / 'default.yaml'
    bad = run(node, '--config', pipe, '--set', 'fusion.filter=kalmann', '--check')
    assert bad.returncode == 2 and bad.stderr.startswith('fusion-node: --set fusion.filter=kalmann:'), bad.stderr
    assert "did you mean 'kalman'" in bad.stderr
    nostage = run(node, '--config', pipe, '--set', 'fuson.filter=kalman', '--check')
    assert nostage.returncode == 2 and "did you mean 'fusion'" in nostage.stderr
    good = run(node, '--config', pipe, '--duration', '0.3', '--set', 'console.min_change_deg=0',
               '--set', 'headings.bind=tcp://127.0.0.1:%d' % free_port())
    assert good.returncode == 0, good.stderr
    assert len(good.stdout.splitlines()) >= 25        # 0.3 s at 100 Hz, every update printed


def test_a_former_setting_name_still_runs_and_the_warning_names_the_new_one(node, tmp_path):
    pipe = tmp_path / 'old.yaml'
    pipe.write_text('stages:\n  s:\n    type: simulator\n    duration: 0.2\n    realtime: false\n'
                    '  f:\n    type: fusion\n    inputs: [s]\n    status_seconds: 0.5\n'
                    '  out:\n    type: stdout\n    inputs: [f]\n    min_change_deg: 0\n')
    r = run(node, '--config', pipe)
    assert r.returncode == 0, r.stderr
    assert "old.yaml:4: 'duration' of stage 's' is now 'duration_s'" in r.stderr, r.stderr
    assert "old.yaml:9: 'status_seconds' of stage 'f' is now 'status_period_s'" in r.stderr, r.stderr
    assert r.stderr.count('warning:') == 2
    assert len(r.stdout.splitlines()) >= 10          # 0.2 s of headings: the old name was read
    # --duration replaces the file's old name rather than adding a second value.
    again = run(node, '--config', pipe, '--duration', '0.1', '--check')
    assert again.returncode == 0 and "'duration'" not in again.stderr, again.stderr
    both = tmp_path / 'both.yaml'
    both.write_text(pipe.read_text().replace('    duration: 0.2\n', '    duration: 0.2\n    duration_s: 1\n'))
    twice = run(node, '--config', both, '--check')
    assert twice.returncode == 2 and 'given twice' in twice.stderr and 'both.yaml:5:' in twice.stderr, twice.stderr
    # The guided calibration reads the same file, and says the same.
    guided = run(node, 'calibrate', '--config', pipe, '-o', tmp_path / 'cal.yaml')
    assert "old.yaml:4: 'duration' of stage 's' is now 'duration_s'" in guided.stderr, guided.stderr


def test_replay_errors_name_the_cause_and_keep_existing_outputs(node, bag, tmp_path):
    keep = tmp_path / 'keep.csv'
    keep.write_text('precious\n' * 100)
    for target in [tmp_path / 'nonexistent', tmp_path]:
        r = run(node, 'replay', target, '--csv', keep)
        assert r.returncode != 0
        assert keep.read_text() == 'precious\n' * 100
    nodir = run(node, 'replay', bag, '--csv', tmp_path / 'nodir' / 'out.csv', '--quiet')
    assert nodir.returncode == 1
    assert nodir.stderr.count("stage 'csv'") == 1 and 'No such file or directory' in nodir.stderr, nodir.stderr
    late = run(node, 'replay', bag, '--start', 500, '--quiet')
    assert late.returncode == 1 and 'past the end' in late.stderr and re.search(r'span \d+\.\d s', late.stderr)
    wrong = run(node, 'replay', bag, '--mag-topic', '/imu/magg', '--quiet')
    assert wrong.returncode == 1 and "did you mean '/imu/mag'" in wrong.stderr


def test_replay_from_a_start_time_keeps_the_rest_and_a_looping_bag_plays_again(node, bag, tmp_path):
    whole, part = tmp_path / 'whole.csv', tmp_path / 'part.csv'
    assert run(node, 'replay', bag, '--csv', whole, '--quiet').returncode == 0
    r = run(node, 'replay', bag, '--start', 2, '--csv', part, '--quiet')
    assert r.returncode == 0, r.stderr                  # it once replayed, then called 2 s past the end
    stamps = lambda f: [float(line.split(',')[0]) for line in f.read_text().splitlines()[1:]]
    w, p = stamps(whole), stamps(part)
    assert abs(p[0] - (w[0] + 2)) < 0.011 and p[-1] == w[-1] and len(p) == len(w) - 200, (p[0], w[0], len(p))

    looped = tmp_path / 'loop.csv'
    config = tmp_path / 'loop.yaml'
    config.write_text(f"""stages:
  bag:
    type: bag
    path: {bag}
    loop: true
  fusion:
    type: fusion
    inputs: [bag]
  csv:
    type: csv
    inputs: [fusion]
    path: {looped}
""")
    proc = subprocess.Popen([str(node), '--config', str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        partial = Path(str(looped) + '.partial')        # the csv sink writes NAME.partial until it closes
        if partial.exists() and partial.stat().st_size > 3 * whole.stat().st_size:
            break
        time.sleep(0.05)
    ended_alone = proc.poll() is not None               # a loop ends only when asked to
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert not ended_alone, err
    assert proc.returncode == 130 and 'stopped on request' in err, err
    assert len(looped.read_text().splitlines()) > 2 * len(w), err


def test_replay_without_outputs_ends_with_a_readable_summary(node, bag):
    r = run(node, 'replay', bag)
    assert r.returncode == 0, r.stderr
    for words in ['final heading', 'mean heading', 'share of headings per flag', 'calibrations accepted',
                  '--csv OUT.csv']:
        assert words in r.stderr, r.stderr
    # The fusion stage says where the final bound comes from, and its parts add up to the bound shown.
    parts = re.search(r'heading accuracy at the end \+-([0-9.]+) \(95 %\): filter ([0-9.]+), disturbance seen '
                      r'([0-9.]+), unknown ([0-9.]+) of ([0-9.]+) \(1-sigma degrees', r.stderr)
    final = re.search(r'final heading [0-9.]+ deg \(\w+\) \+-([0-9.]+)', r.stderr)
    assert parts and final, r.stderr
    bound, filt, seen, unknown, prior = map(float, parts.groups())
    assert bound == float(final.group(1)), r.stderr
    assert abs(1.96 * math.hypot(filt, seen / 1.96 + unknown) - bound) < 0.25, r.stderr
    assert 0 < unknown <= prior + 0.05, r.stderr


def test_bag_echo_names_a_missing_topic_and_accepts_both_spellings(node, bag):
    wrong = run(node, 'bag', 'echo', bag, '--topic', '/imu/magg')
    assert wrong.returncode == 2 and "did you mean '/imu/mag'" in wrong.stderr and '/imu/data_raw' in wrong.stderr
    plain = run(node, 'bag', 'echo', bag, '--topic', 'imu/mag', '--limit', 2)
    assert plain.returncode == 0 and len(plain.stdout.splitlines()) == 2


def test_echo_says_what_it_waits_for_and_ends_at_the_end_of_stream(node, bag):
    port = free_port()
    endpoint = f'tcp://127.0.0.1:{port}'
    echo = subprocess.Popen([str(node), 'echo', endpoint, '/heading'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(0.5)
    replay = run(node, 'replay', bag, '--publish', endpoint, '--wait-for-subscribers', 1, '--quiet')
    assert replay.returncode == 0, replay.stderr
    out, err = echo.communicate(timeout=30)
    assert echo.returncode == 0, err
    assert "waiting for 'heading' on " + endpoint in err and 'stream ended' in err
    lines = [json.loads(l) for l in out.splitlines()]
    assert len(lines) == 600 and all(l['topic'] == 'heading' for l in lines)
    assert all(isinstance(l['message']['flag_names'], list) for l in lines)
    assert all(bool(l['message']['flag_names']) == (l['message']['flags'] != 0) for l in lines)
    quiet = run(node, 'echo', f'tcp://127.0.0.1:{free_port()}', '--timeout', 1)
    assert quiet.returncode == 1 and 'nothing arrived' in quiet.stderr


def test_json_headings_respect_min_change_deg(node, tmp_path):
    pipe = tmp_path / 'j.yaml'
    pipe.write_text('stages:\n  s:\n    type: simulator\n    scenario: rest\n    duration_s: 3\n    realtime: false\n'
                    '  f:\n    type: fusion\n    inputs: [s]\n'
                    '  out:\n    type: stdout\n    inputs: [f]\n    format: json\n    min_change_deg: 5\n')
    r = run(node, '--config', pipe)
    assert r.returncode == 0, r.stderr
    assert 1 <= len(r.stdout.splitlines()) < 10          # at rest: the heading hardly changes


def test_stdout_streams_a_live_line_before_the_input_ends(node):
    """Functional, not timed: a line fed on stdin comes out while stdin is still open."""
    p = subprocess.Popen([str(node), '--config', ROOT / 'Pipelines' / 'live-lines.yaml', '--set',
                          f'display.bind=tcp://127.0.0.1:{free_port()}'],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        for i in range(3):
            p.stdin.write(f'{1700000000 + i * 0.01:.2f},0,0,0,0,0,9.81,2e-5,0,-4e-5\n')
            p.stdin.flush()
        line = p.stdout.readline()           # blocks until the first fused heading is printed
        assert json.loads(line)['topic'] == 'heading'
    finally:
        p.stdin.close()
        p.wait(timeout=30)


def test_a_closed_stdout_ends_the_run_at_once(node):
    p = subprocess.Popen(f'"{node}" --duration 120 | head -1', shell=True, stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=30)       # would take 120 s if the pipeline did not notice
    assert out.startswith('t=')


def test_sigint_before_the_end_exits_130(node, bag):
    p = subprocess.Popen([str(node), 'replay', str(bag), '--rate', '0.2', '--quiet'], stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 130


def test_completion_scripts_know_commands_options_and_stage_types(node):
    script = run(node, 'completion', 'bash').stdout
    assert subprocess.run(['bash', '-n'], input=script, text=True).returncode == 0
    for word in ['replay', '--accuracy-csv', 'calibration', 'summary', '--set', 'info']:
        assert word in script
    cases = [('fusion-node replay x --acc', '--accuracy-csv'), ('fusion-node stages fu', 'fusion'),
             ('fusion-node ros2 echo --do', '--domain-id'), ('fusion-node bag ', 'convert echo info'),
             ('fusion-node --print-m', '--print-man-page')]

    def probe(words):
        count = len(words.split()) - (0 if words.endswith(' ') else 1)
        return f'COMP_WORDS=({words} ""); COMP_WORDS=("${{COMP_WORDS[@]:0:{count + 1}}}"); COMP_CWORD={count}; ' \
            '_fusion_node; echo "${COMPREPLY[*]}"'

    for words, expected in cases:
        r = subprocess.run(['bash', '-c', f'{script}\n{probe(words)}'], capture_output=True, text=True)
        assert sorted(r.stdout.split()) == sorted(expected.split()) and not r.stderr, (words, r.stdout, r.stderr)
    zsh = run(node, 'completion', 'zsh').stdout
    assert zsh.startswith('#compdef fusion-node\n') and 'bashcompinit' in zsh
    if shutil.which('zsh'):
        # The same function through zsh's bashcompinit (0-based arrays, as it calls it). Outside a
        # completion widget its compgen does not filter by prefix (zsh does that), so the words the
        # command path offers must include the expected ones, and nothing may go to stderr.
        for words, expected in cases:
            script = f'source <({node} completion zsh)\nsetopt ksharrays\n{probe(words)}'
            r = subprocess.run(['zsh', '-f', '-c', script], capture_output=True, text=True)
            assert set(expected.split()) <= set(r.stdout.split()) and not r.stderr, (words, r.stdout, r.stderr)


def test_stage_reference_is_the_registry(node):
    """docs/stages.md below its marker is `fusion-node stages` (tools/gen_reference.py writes it)."""
    text = (ROOT / 'docs' / 'stages.md').read_text()
    marker = text.index('<!-- Generated by tools/gen_reference.py')
    assert text[text.index('\n', marker):].strip() == run(node, 'stages').stdout.strip()


def test_command_reference_is_the_help(node):
    """Every help block of docs/commands.md is the binary's output, and every command has one."""
    text = (ROOT / 'docs' / 'commands.md').read_text()
    blocks = re.findall(r'```\n\$ fusion-node ([^\n]*)\n(.*?)```', text, re.S)
    for args, shown in blocks:
        assert run(node, *args.split()).stdout.rstrip() == shown.rstrip(), args
    top = run(node, '--help').stdout
    listed = re.findall(r'^  ([a-z0-9]+) {2,}', top.split('commands:')[1].split('other:')[0], re.M)
    # `help fleet` documents fleet (whose own --help is the Python package's).
    documented = {args.split()[1] if args.startswith('help ') else args.split()[0] for args, _ in blocks}
    assert [c for c in listed if c != 'help' and c not in documented] == []


def test_readme_is_short_and_links_every_document():
    readme = (ROOT / 'README.md').read_text()
    assert len(readme.splitlines()) <= 250
    for doc in sorted((ROOT / 'docs').glob('*.md')):
        assert f'](docs/{doc.name})' in readme, doc.name
    for link in re.findall(r'\]\(([^)#]+)\)', readme):
        assert (ROOT / link).exists(), link


def test_readme_python_subscriber_runs_from_any_directory(node, tmp_path):
    """The README's pyzmq subscriber, run from an empty directory, receives every heading of a replay."""
    readme = (ROOT / 'README.md').read_text()
    script = re.search(r'```python\n(.*?)```', readme, re.S).group(1)
    port = free_port()
    (tmp_path / 'sub.py').write_text(script.replace('5601', str(port)))
    bag = tmp_path / 'sim.mcap'
    subprocess.run([str(node), '--config', str(ROOT / 'Pipelines' / 'simulate-bag.yaml')], cwd=tmp_path, check=True,
                   env={**os.environ, 'OUT': str(bag), 'TRUTH': str(tmp_path / 'truth.csv')}, capture_output=True)
    out = open(tmp_path / 'sub.out', 'w')  # a file, not a pipe the test would have to drain meanwhile
    sub = subprocess.Popen([sys.executable, 'sub.py'], cwd=tmp_path, stdout=out, text=True)
    replay = subprocess.run([str(node), 'replay', str(bag), '--publish', f'tcp://127.0.0.1:{port}', '--encoding',
                             'json', '--wait-for-subscribers', '1', '--quiet'], capture_output=True, text=True,
                            timeout=60)
    assert replay.returncode == 0, replay.stderr
    assert sub.wait(timeout=30) == 0
    out.close()
    lines = (tmp_path / 'sub.out').read_text().splitlines()
    assert len(lines) == 12000
    assert 'no_position' in lines[-1]


def test_no_source_line_is_longer_than_120_columns():
    """swift-format keeps code within 120 columns but leaves multi-line string literals alone."""
    long = [f'{p.relative_to(ROOT)}:{n}' for base in ('Sources', 'Tests') for p in sorted((ROOT / base).rglob('*.swift'))
            for n, line in enumerate(p.read_text().splitlines(), 1) if len(line) > 120]
    assert long == []


@pytest.mark.parametrize('how', ['convert', 'record'])
def test_an_existing_recording_is_never_overwritten(node, bag, tmp_path, how):
    out = tmp_path / 'existing.mcap'
    out.write_bytes(b'keep me')
    args = ['bag', 'convert', str(bag), str(out)] if how == 'convert' else \
        ['replay', str(bag), '--record', str(out), '--quiet']
    r = run(node, *args)
    if how == 'convert':
        assert r.returncode == 1 and 'already exists' in r.stderr and str(out) in r.stderr, r.stderr
    else:                                   # refused before the run, --overwrite or not
        assert r.returncode == 2 and 'recordings are never replaced' in r.stderr and str(out) in r.stderr, r.stderr
        r = run(node, *args, '--overwrite')
        assert r.returncode == 2 and 'recordings are never replaced' in r.stderr, r.stderr
    assert out.read_bytes() == b'keep me'


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM])
def test_a_supervised_pipeline_stopped_by_a_signal_exits_130_not_failed(node, sig):
    """A service manager stops a supervised pipeline with SIGTERM: each stage stops, and the supervisor
    reports the interruption (130) like every other command, not a failure (1)."""
    p = subprocess.Popen([str(node), '--config', str(ROOT / 'Pipelines' / 'default.yaml'), '--supervise',
                          '--set', f'headings.bind=tcp://127.0.0.1:{free_port()}'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    assert p.poll() is None
    p.send_signal(sig)
    stderr = p.communicate(timeout=30)[1]
    assert p.returncode == 130, stderr
    assert 'while stopping' not in stderr
    assert stderr.count(' stopped\n') >= 4, stderr


def test_replay_ros2_takes_its_domain_from_ros_domain_id(node, bag):
    env = {**os.environ, 'ROS_DOMAIN_ID': '57',
           'CYCLONEDDS_URI': f'file://{ROOT}/Pipelines/cyclonedds-loopback.xml'}
    for extra, domain in [([], 57), (['--domain-id', '3'], 3)]:
        r = subprocess.run([str(node), 'replay', str(bag), '--ros2', '--duration', '1', *extra], capture_output=True,
                           text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert f'published over DDS (domain {domain})' in r.stderr, r.stderr


def test_samples_the_filter_cannot_use_make_exit_code_3(node):
    """A thousand samples with one time stamp: the filter uses one; the run says so in its exit code."""
    from test_pipeline_interop import free_port
    line = '1700000000.0,0.01,0,0,0,0,9.81,2e-5,0,-4e-5\n'
    r = subprocess.run([str(node), '--config', str(ROOT / 'Pipelines' / 'live-lines.yaml'), '--set',
                        f'display.bind=tcp://127.0.0.1:{free_port()}'], input=line * 1000, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert 'time not increasing 999' in r.stderr


def test_stage_processes_end_when_their_supervisor_is_killed(node):
    """SIGKILL gives the supervisor no chance to stop its stages: they notice it is gone and stop."""
    p = subprocess.Popen([str(node), '--config', str(ROOT / 'Pipelines' / 'default.yaml'), '--supervise',
                          '--set', f'headings.bind=tcp://127.0.0.1:{free_port()}'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(4)
    children = subprocess.run(['pgrep', '-P', str(p.pid)], capture_output=True, text=True).stdout.split()
    assert len(children) == 6
    p.kill()
    p.wait()
    from test_hostile_surfaces import processes_gone
    assert processes_gone(children)


def test_rotate_bag_and_mounting_options_undo_each_other(node, tmp_path):
    """tools/rotate_bag.sh turns a recording's magnetometer as if mounted roll_180_yaw_90; replay with the
    same --mag-rotation gives the original's orientations, replay without does not, finds the mounting from
    the motion and says so (exit 4)."""
    import numpy as np
    from test_default_graph import simulated_bag
    bag = simulated_bag(node, tmp_path, duration=30)
    turned = tmp_path / 'turned.mcap'
    r = subprocess.run(['bash', str(ROOT / 'tools' / 'rotate_bag.sh'), str(bag), str(turned), '--mag',
                        'roll_180_yaw_90'], capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'FUSION_NODE': str(node)})
    assert r.returncode == 0, r.stderr
    csv = {}
    for name, path, extra in [('plain', bag, []), ('mounted', turned, ['--mag-rotation', 'roll_180_yaw_90']),
                              ('unmounted', turned, [])]:
        out = tmp_path / f'{name}.csv'
        r = run(node, 'replay', path, '--csv', out, '--quiet', *extra, timeout=120)
        assert r.returncode == (4 if name == 'unmounted' else 0), r.stderr
        assert name != 'unmounted' or '--mag-rotation roll_180_yaw_90' in r.stderr, r.stderr
        csv[name] = np.loadtxt(out, delimiter=',', skiprows=1)
    assert csv['mounted'].shape == csv['plain'].shape
    assert np.abs(csv['mounted'] - csv['plain']).max() < 1e-9
    assert np.abs(csv['unmounted'][:, 1:] - csv['plain'][:, 1:]).max() > 0.1


def test_outputs_are_partial_until_complete_and_never_replaced_unasked(node, tmp_path):
    """A killed run leaves OUT.csv.partial and no OUT.csv; a finished run renames it; a second run refuses to
    replace OUT.csv (exit 2, naming it and --overwrite) and leaves it as it was; --overwrite replaces it."""
    import signal, time
    out = tmp_path / 'out.csv'
    partial = tmp_path / 'out.csv.partial'
    def config(realtime):
        path = tmp_path / f'sim-{realtime}.yaml'
        path.write_text(f"""stages:
  sim: {{type: simulator, duration_s: 30, realtime: {realtime}}}
  fusion: {{type: fusion, inputs: [sim]}}
  csv: {{type: csv, inputs: [fusion], path: '{out}'}}
""")
        return path
    p = subprocess.Popen([str(node), '--config', str(config('true'))], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not partial.exists() or partial.stat().st_size < 2000):
        time.sleep(0.1)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    assert partial.exists() and not out.exists()
    assert partial.read_text().startswith('t,qw,qx,qy,qz\n')
    r = run(node, '--config', config('false'), timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.exists() and not partial.exists()
    first = out.read_bytes()
    assert first.count(b'\n') == 3001
    r = run(node, '--config', config('false'), timeout=120)
    assert r.returncode == 2 and f'{out} exists' in r.stderr and '--overwrite' in r.stderr, r.stderr
    assert out.read_bytes() == first
    r = run(node, '--config', config('false'), '--overwrite', timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == first and not partial.exists()


def test_replay_takes_the_mounting_from_the_bags_tf_static(node, tmp_path):
    """A recording of sensors mounted roll_180 (IMU) and [0, 90, -90] (compass) with their transforms on
    /tf_static: `replay --imu-rotation tf --mag-rotation tf` gives the straight recording's orientations;
    a bag without /tf_static is refused before it runs, naming the topic."""
    import numpy as np
    from test_default_graph import simulated_bag
    (tmp_path / 'straight').mkdir()
    straight = simulated_bag(node, tmp_path / 'straight', duration=20)
    config = tmp_path / 'tf.yaml'
    config.write_text(f"""stages:
  sim: {{type: simulator, scenario: default, duration_s: 20, realtime: false, hard_iron_ut: [25, -30, 12],
         imu_rotation: roll_180, mag_rotation: [0, 90, -90], publish_tf: true}}
  rec: {{type: record, inputs: [sim], path: '{tmp_path}/tf.mcap', topics: [imu/data_raw, imu/mag, tf_static]}}
""")
    r = run(node, '--config', config, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {}
    for name, bag, extra in [('straight', straight, []),
                             ('tf', tmp_path / 'tf.mcap', ['--imu-rotation', 'tf', '--mag-rotation', 'tf'])]:
        out = tmp_path / f'{name}.csv'
        r = run(node, 'replay', bag, '--csv', out, *extra, timeout=120)
        assert r.returncode == 0, r.stderr
        rows[name] = np.loadtxt(out, delimiter=',', skiprows=1)
    assert "mag_link to base_link is [0, 90, -90] deg (mag_link -> base_link)" in r.stderr, r.stderr
    assert rows['tf'].shape == rows['straight'].shape and np.abs(rows['tf'] - rows['straight']).max() < 1e-9
    r = run(node, 'replay', straight, '--csv', tmp_path / 'none.csv', '--mag-rotation', 'tf', timeout=120)
    assert r.returncode == 1 and 'has no topic /tf_static (tf_topic)' in r.stderr, r.stderr


def test_replay_finds_the_magnetometer_mounting(node, tmp_path):
    """A recording whose magnetometer is mounted yaw_90: `replay --mag-rotation auto` names it from the motion
    and says how many readings it held back; with --no-calibration (nothing would find it) it is refused."""
    from test_default_graph import simulated_bag
    bag = simulated_bag(node, tmp_path, duration=60)
    turned = tmp_path / 'turned.mcap'
    r = subprocess.run(['bash', str(ROOT / 'tools' / 'rotate_bag.sh'), str(bag), str(turned), '--mag', 'yaw_90'],
                       capture_output=True, text=True, timeout=120, env={**os.environ, 'FUSION_NODE': str(node)})
    assert r.returncode == 0, r.stderr
    r = run(node, 'replay', turned, '--csv', tmp_path / 'auto.csv', '--mag-rotation', 'auto', timeout=120)
    assert r.returncode == 0, r.stderr
    assert "the magnetometer's mounting is yaw_90, " in r.stderr
    assert 'magnetometer reading(s) held back until the mounting was clear' in r.stderr
    r = run(node, 'replay', turned, '--csv', tmp_path / 'x.csv', '--mag-rotation', 'auto', '--no-calibration')
    assert r.returncode == 2 and '--mag-rotation auto needs the calibration stage' in r.stderr


def recorded_simulation(node, tmp_path, simulator):
    """Records the simulator (its settings after `type: simulator, `) as tmp_path/sim.mcap with the IMU and
    magnetometer topics; returns the pipeline file and the bag."""
    config, bag = tmp_path / 'sim.yaml', tmp_path / 'sim.mcap'
    config.write_text(f"""
stages:
  sim: {{type: simulator, {simulator}}}
  rec: {{type: record, inputs: [sim], path: '{bag}', topics: [imu/data_raw, imu/mag]}}
""")
    assert run(node, '--config', config).returncode == 0
    return config, bag


def test_replay_fuses_an_extra_magnetometer_turned_into_the_body(node, tmp_path):
    """A second compass mounted yaw_90 with its own hard iron: `replay --extra-magnetometer` reads it, gives it
    its own calibration stage and fuses it once `--extra-mag-rotation` turns it into the body's axes (without
    the rotation it is outvoted); the graph it prints is a pipeline file that runs the same CSV; a source's
    `magnetometers` list says the same in a file; mistakes name the option."""
    bag = tmp_path / 'two.mcap'
    (tmp_path / 'rec.yaml').write_text(f"""
stages:
  sim: {{type: simulator, scenario: figure_eight, duration_s: 60, realtime: false, extra_magnetometers: [mast=yaw_90],
        hard_iron_ut: [10, -5, 3], extra_hard_iron_ut: [4, 6, -2]}}
  rec: {{type: record, inputs: [sim], path: '{bag}', topics: [imu/data_raw, imu/mag, imu/mag/mast]}}
""")
    assert run(node, '--config', tmp_path / 'rec.yaml').returncode == 0

    def mast_used(stderr):
        found = re.search(r'mast: \d+ reading\(s\), used ([0-9.]+) %', stderr)
        assert found, stderr
        return float(found[1])

    extra = ['--extra-magnetometer', 'mast=/imu/mag/mast']
    r = run(node, 'replay', bag, *extra, '--extra-mag-rotation', 'mast=yaw_90', '--csv', tmp_path / 'r.csv',
            '--print-config', tmp_path / 'ran.yaml', timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'calibration_mast:' in r.stderr and mast_used(r.stderr) > 75, r.stderr
    unturned = run(node, 'replay', bag, *extra, '--csv', tmp_path / 'u.csv', timeout=120)
    # Told nothing, the mast's calibration stage finds it turned and says so (exit 4); the mast is left out.
    assert unturned.returncode == 4 and mast_used(unturned.stderr) < 50, unturned.stderr
    assert 'give --mag-rotation yaw_90 (or auto)' in unturned.stderr, unturned.stderr
    ran = (tmp_path / 'ran.yaml').read_text().replace(str(tmp_path / 'r.csv'), str(tmp_path / 'again.csv'))
    (tmp_path / 'again.yaml').write_text(ran)
    assert run(node, '--config', tmp_path / 'again.yaml', timeout=120).returncode == 0
    assert (tmp_path / 'again.csv').read_text() == (tmp_path / 'r.csv').read_text()
    (tmp_path / 'list.yaml').write_text(f"""
stages:
  bag:
    type: bag
    path: '{bag}'
    magnetometers:
      - {{topic: /imu/mag}}
      - {{name: mast, topic: /imu/mag/mast, rotation: yaw_90}}
  calibration: {{type: calibration, inputs: [bag], online: true, prompt: false}}
  calibration_mast: {{type: calibration, inputs: [calibration], magnetometer: mast, online: true, prompt: false}}
  fusion: {{type: fusion, inputs: [calibration_mast]}}
  csv: {{type: csv, inputs: [fusion], path: '{tmp_path / "list.csv"}'}}
""")
    assert run(node, '--config', tmp_path / 'list.yaml', timeout=120).returncode == 0
    assert (tmp_path / 'list.csv').read_text() == (tmp_path / 'r.csv').read_text()
    for args, says in ((['--extra-magnetometer', 'ma-st=/imu/mag/mast'], "'ma-st' is not a magnetometer name"),
                       (['--extra-magnetometer', 'mast'], 'expected NAME=TOPIC'),
                       (extra + ['--extra-mag-rotation', 'gps=yaw_90'], 'for a NAME of --extra-magnetometer'),
                       (extra + ['--extra-mag-rotation', 'mast=yaw_91'], "did you mean 'yaw_90'")):
        r = run(node, 'replay', bag, *args, '--csv', tmp_path / 'x.csv')
        assert r.returncode == 2 and says in r.stderr, r.stderr


def test_calibrate_learns_online_from_a_recording_too_one_sided_for_a_whole_set_fit(node, tmp_path):
    """The simulator's default motion turns the sensor through too little of the sphere for the whole-set
    fit (refused, and said so); `calibrate` then runs the recording through the online calibrator, whose
    gyro-aided fit needs no coverage, and saves its best fit: the hard iron within 0.5 uT."""
    import numpy as np
    _, bag = recorded_simulation(node, tmp_path, 'duration_s: 90, realtime: false, hard_iron_ut: [12, -8, 5]')
    out = tmp_path / 'cal.json'
    r = run(node, 'calibrate', bag, '-o', out, timeout=180)
    assert r.returncode == 0, r.stderr
    assert 'whole-set fit:   refused' in r.stdout and "the online calibrator's best" in r.stdout, r.stdout
    stored = json.loads(out.read_text())
    assert np.abs(np.array(stored['hard_iron_ut']) - [12, -8, 5]).max() < 0.5, stored


def test_calibrate_says_why_a_recording_gave_no_calibration(node, tmp_path):
    """A walking recording (turning about the vertical, little else): neither the whole-set fit nor the online calibrator can
    calibrate it; nothing is written, exit 1, and the message says how little the gyro-aided fit saw turn."""
    _, bag = recorded_simulation(node, tmp_path, 'scenario: walking, duration_s: 40, realtime: false')
    out = tmp_path / 'cal.json'
    r = run(node, 'calibrate', bag, '-o', out, timeout=180)
    assert r.returncode == 1 and not out.exists(), r.stdout + r.stderr
    found = re.search(r"the gyro-aided fit's windows turned with a spread of at most ([0-9.]+) \(it needs 0\.10",
                      r.stderr)
    assert found and float(found[1]) < 0.1, r.stderr


def test_a_wrong_mounting_or_iron_nothing_removes_ends_the_replay_with_exit_4(node, tmp_path):
    """Two misconfigurations a new user makes: a magnetometer mounted yaw_90 replayed without
    --mag-rotation, and readings with hard iron replayed with --no-calibration. Both run to the end
    (the CSV is complete), name the cause and the remedy, and exit 4; told right, they exit 0."""
    _, bag = recorded_simulation(
        node, tmp_path, 'duration_s: 120, realtime: false, hard_iron_ut: [25, -30, 12], mag_rotation: yaw_90')
    cases = ((['--mag-rotation', 'yaw_90'], 0, None),
             ([], 4, '--mag-rotation yaw_90 (or auto)'),
             (['--mag-rotation', 'yaw_90', '--no-calibration'], 4, 'drop --no-calibration'))
    for i, (extra, code, says) in enumerate(cases):
        out = tmp_path / f'out{i}.csv'
        r = run(node, 'replay', bag, '--csv', out, *extra, timeout=180)
        assert r.returncode == code, (extra, r.returncode, r.stderr[-2000:])
        assert says is None or says in r.stderr, (extra, r.stderr[-2000:])
        assert len(out.read_text().splitlines()) == 12_001, extra


def test_calibrate_never_saves_a_fit_no_better_than_none(node, tmp_path):
    """A magnetometer calibrated already (no hard or soft iron), turned every way: a fit explains its
    readings no better than the readings as they come, so nothing is written, exit 1, and the message
    gives both spreads."""
    _, bag = recorded_simulation(
        node, tmp_path, 'scenario: figure_eight, duration_s: 60, realtime: false, hard_iron_ut: [0, 0, 0]')
    out = tmp_path / 'cal.json'
    r = run(node, 'calibrate', bag, '-o', out, timeout=180)
    assert r.returncode == 1 and not out.exists(), r.stdout + r.stderr
    assert 'no calibration written' in r.stderr and 'calibrated already' in r.stderr, r.stderr
    assert re.search(r'strength spread [0-9.]+ % raw, [0-9.]+ % fitted', r.stderr), r.stderr


def test_calibrate_refits_a_recording_and_replay_uses_it_from_the_start(node, tmp_path):
    """Hard iron (25, -30, 12) uT and 10 % soft iron: `calibrate` recovers both (1 uT, 1 %), and a replay with
    the file has no calibration phase: its early headings match the truth where the online replay's do not."""
    import numpy as np
    truth = tmp_path / 'truth.csv'
    config, bag = recorded_simulation(
        node, tmp_path, "scenario: figure_eight, duration_s: 60, realtime: false, hard_iron_ut: [25, -30, 12],\n"
        f"         soft_iron: [1.1, 0.03, 0, 0.03, 0.95, 0, 0, 0, 1.0], truth_path: '{truth}'")
    out = tmp_path / 'cal.json'
    r = run(node, 'calibrate', bag, '-o', out, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'heading change:' in r.stdout and 'saved:' in r.stdout, r.stdout
    stored = json.loads(out.read_text())
    assert np.abs(np.array(stored['hard_iron_ut']) - [25, -30, 12]).max() < 1.0, stored
    # The correction undoes the simulated soft iron up to a common scale: W S = k I within 1 %.
    w = np.array(stored['soft_iron']).reshape(3, 3)
    product = w @ np.array([[1.1, 0.03, 0], [0.03, 0.95, 0], [0, 0, 1.0]])
    k = np.trace(product) / 3
    assert np.abs(product / k - np.eye(3)).max() < 0.01, product / k
    # Never overwritten; a recording with too little motion is refused and writes nothing.
    assert run(node, 'calibrate', bag, '-o', out).returncode == 2
    still = tmp_path / 'still.mcap'
    config.write_text(config.read_text().replace('figure_eight', 'rest').replace(str(bag), str(still))
                      .replace(str(truth), str(tmp_path / 'still-truth.csv')))
    assert run(node, '--config', config).returncode == 0
    refused = tmp_path / 'refused.json'
    r = run(node, 'calibrate', still, '-o', refused, timeout=120)
    assert r.returncode == 1 and 'no calibration written' in r.stderr and not refused.exists(), r.stderr
    # From the start: the first 10 s of headings against the truth.
    def early_error(extra):
        csv = tmp_path / f'h{len(extra)}.csv'
        assert run(node, 'replay', bag, '--csv', csv, '--quiet', *extra, timeout=120).returncode == 0
        est = np.loadtxt(csv, delimiter=',', skiprows=1)
        ref = np.loadtxt(truth, delimiter=',', skiprows=1)
        def heading(q):
            w, x, y, z = q.T
            return np.degrees(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
        n = min(len(est), len(ref), 1000)
        d = (heading(est[:n, 1:5]) - heading(ref[:n, 1:5]) + 180) % 360 - 180
        return np.sqrt(np.mean(d[200:] ** 2))          # after the first 2 s of initialisation
    with_file, online = early_error(['--calibration', str(out)]), early_error([])
    assert with_file < 3 and online > 3 * with_file, (with_file, online)
    bad = tmp_path / 'bad.json'
    bad.write_text('{"version": 1}')
    r = run(node, 'replay', bag, '--calibration', bad, '--csv', tmp_path / 'x.csv')
    assert r.returncode == 2 and 'bad.json' in r.stderr, r.stderr


def test_replay_takes_gnss_topics_and_prints_the_config_it_ran(node, tmp_path):
    """The simulated drive's bag: --velocity-topic and --course-is-heading reach the bag and fusion stages
    (the summary counts velocities and courses), --no-mag leaves the magnetometer out, --set reaches any
    setting, a topic of the wrong type is named, and --print-config writes what ran, options included."""
    bag, truth = tmp_path / 'drive.mcap', tmp_path / 'truth.csv'
    r = run(node, '--config', ROOT / 'Pipelines' / 'simulate-drive.yaml',
            env={**os.environ, 'DURATION': '40', 'OUT': str(bag), 'TRUTH': str(truth)})
    assert r.returncode == 0, r.stderr
    r = run(node, 'replay', bag, '--no-calibration', '--velocity-topic', '/gnss/velocity', '--course-is-heading',
            '--set', 'fusion.min_course_speed=3', '--print-config', tmp_path / 'ran.yaml')
    assert r.returncode == 0, r.stderr
    counts = re.search(r'gnss: velocity (\d+), course (\d+) \(0 rejected\)', r.stderr)
    assert counts and int(counts[1]) == 400 and int(counts[2]) > 100, r.stderr
    printed = (tmp_path / 'ran.yaml').read_text()
    for line in ('velocity_topic: /gnss/velocity', 'course_is_heading: "true"', 'min_course_speed: "3"'):
        assert line in printed, printed
    again = run(node, '--config', tmp_path / 'ran.yaml')
    assert again.returncode == 0 and counts[0] in again.stderr, again.stderr
    r = run(node, 'replay', bag, '--no-calibration', '--no-mag', '--velocity-topic', '/gnss/velocity')
    assert r.returncode == 0, r.stderr
    assert 'bag: published 4400' in r.stderr and '0 of 0 magnetometer samples' in r.stderr, r.stderr
    for options in (['--course-is-heading'], ['--no-mag']):                  # nothing to take the heading from
        r = run(node, 'replay', bag, *options)
        assert r.returncode == 2 and options[0] in r.stderr and '--velocity-topic' in r.stderr, r.stderr
    r = run(node, 'replay', bag, '--velocity-topic', '/imu/mag')
    assert r.returncode == 1 and 'velocity_topic /imu/mag carries sensor_msgs/msg/MagneticField' in r.stderr, r.stderr
    r = run(node, 'replay', bag, '--set', 'fusion.course_slip=2')
    assert r.returncode == 2 and "unknown setting 'course_slip'" in r.stderr and 'course_slip_deg' in r.stderr, \
        r.stderr


def test_a_mistyped_stage_type_setting_or_stage_name_gets_a_suggestion(node, tmp_path):
    """Every error that names a name suggests the nearest: a stage type, a setting, `--stage NAME` (a usage
    error, exit 2, before anything runs)."""
    config = tmp_path / 'p.yaml'
    config.write_text('stages:\n  sim: {type: simulator, duration_s: 1, realtime: false}\n'
                      '  fusion: {type: fuson, inputs: [sim]}\n')
    r = run(node, '--config', config)
    assert r.returncode == 2 and "unknown stage type 'fuson'" in r.stderr and "did you mean 'fusion'" in r.stderr
    config.write_text('stages:\n  sim: {type: simulator, duration_s: 1, realtime: false}\n'
                      '  fusion: {type: fusion, inputs: [sim], fliter: kalman}\n'
                      '  out: {type: summary, inputs: [fusion]}\n')
    r = run(node, '--config', config)
    assert r.returncode == 2 and "unknown setting 'fliter'" in r.stderr and "did you mean 'filter'" in r.stderr
    config.write_text('stages:\n  sim: {type: simulator, duration_s: 1, realtime: false}\n'
                      '  fusion: {type: fusion, inputs: [sim]}\n  out: {type: summary, inputs: [fusion]}\n')
    r = run(node, '--config', config, '--stage', 'fuson')
    assert r.returncode == 2 and "no such stage" in r.stderr and "did you mean 'fusion'" in r.stderr, r.stderr
