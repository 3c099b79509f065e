"""GyroCompass as a ROS 2 node on DDS, proven against two independent DDS implementations with no ROS
installed: Eclipse Cyclone DDS's Python binding (PyPI, its own libddsc 11.x, typed samples) and
eProsima Fast DDS (Debian's libfastrtps-dev 2.9, a C++ peer built here).

For each peer: it publishes imu/data_raw and imu/mag of a recording at 1 kHz, fusion-node fuses them
(ros2_source -> fusion -> ros2_sink), the peer receives imu/data and heading; every message arrives,
and each payload is byte-identical to what `rosbags` serializes for the same values and to what
`fusion-node replay` of the same bag records, frame for frame.

Also: a topic of another type and a QoS that cannot match are explained on stderr; malformed CDR from
a peer is counted and skipped (exit 3); SIGINT leaves the domain at once; `fusion-node ros2 echo`
prints what `replay --ros2` publishes.
"""
import itertools, json, math, os, signal, subprocess, time
from pathlib import Path

import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin

from test_bag_interop import make_messages, node, write_rosbags  # noqa: F401  (fixture)

import sys
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'tools'))
import dds_peer  # noqa: E402

SHARED_BAG = ROOT.parent / 'shared' / 'data' / 'broad' / 'bags' / '02_undisturbed_slow_rotation_B'
DOMAINS = itertools.count(60)


@pytest.fixture(autouse=True)
def loopback_discovery(monkeypatch):
    """Every DDS participant of a test (fusion-node, Python cyclonedds, Fast DDS) stays on 127.0.0.1."""
    monkeypatch.setenv('CYCLONEDDS_URI', 'file://' + str(ROOT / 'Pipelines' / 'cyclonedds-loopback.xml'))
    monkeypatch.setenv('FASTRTPS_DEFAULT_PROFILES_FILE', str(ROOT / 'tools' / 'interop' / 'fastdds-loopback.xml'))


@pytest.fixture
def python_participant():
    """A Python cyclonedds participant in a domain, gone (with its endpoints) when the test ends:
    one left behind in this process was seen to disturb later Fast DDS tests' discovery."""
    from cyclonedds.domain import DomainParticipant
    made = []

    def make(domain):
        made.append(DomainParticipant(domain))
        return made[-1]
    yield make
    made.clear()
    import gc
    gc.collect()


@pytest.fixture(scope='session')
def fastdds_peer(tmp_path_factory):
    out = tmp_path_factory.mktemp('fastdds') / 'fastdds_peer'
    subprocess.run(['g++', '-std=c++17', '-O1', str(ROOT / 'tools' / 'interop' / 'fastdds_peer.cpp'), '-o', str(out),
                    '-lfastrtps', '-lfastcdr'], check=True)
    return out


@pytest.fixture(scope='module', params=['generated', 'broad-02'])
def recording(request, tmp_path_factory):
    """A bag with only IMU and magnetometer messages: generated, or the first 2000 pairs of a shared one."""
    path = tmp_path_factory.mktemp('rec') / 'input'
    if request.param == 'generated':
        messages = [m for m in make_messages(n=1500, seed=5) if m[0] != '/fix']
        write_rosbags(path, messages, StoragePlugin.MCAP)
        return path
    if not SHARED_BAG.exists():
        pytest.skip(f'shared recording {SHARED_BAG} not present')
    store = dds_peer.typestore()
    messages = []
    with AnyReader([SHARED_BAG], default_typestore=store) as reader:
        conns = [c for c in reader.connections if c.topic in ('/imu/data_raw', '/imu/mag')]
        for conn, t, raw in reader.messages(connections=conns):
            messages.append((conn.topic, conn.msgtype, t, reader.deserialize(raw, conn.msgtype)))
            if len(messages) >= 4000:
                break
    write_rosbags(path, messages, StoragePlugin.MCAP)
    return path


def replay_reference(node, bag, tmp_path):
    """What `fusion-node replay BAG --record --no-calibration` stores on /imu/data and /heading, by topic, in
    order: the graph `start_fusion` runs over DDS (fusion alone)."""
    out = tmp_path / 'reference.mcap'
    subprocess.run([str(node), 'replay', str(bag), '--record', str(out), '--quiet', '--no-calibration'], check=True)
    ref = {'/imu/data': [], '/heading': []}
    with AnyReader([out]) as reader:
        for conn, _, raw in reader.messages():
            ref[conn.topic].append(bytes(raw))
    return ref


def start_fusion(node, tmp_path, domain, source_qos='reliable, keep_all', extra_sink=''):
    config = tmp_path / 'ros2.yaml'
    config.write_text(f"""name: ros2-interop
stages:
  dds:
    type: ros2_source
    domain_id: {domain}
    qos: {source_qos}
    end_after_idle_s: 3
  fusion:
    type: fusion
    inputs: [dds]
  out:
    type: ros2_sink
    inputs: [fusion]
    domain_id: {domain}
    qos: reliable, keep_all
{extra_sink}""")
    return subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.PIPE, text=True)


def test_cyclonedds_python_peer_fuses_like_replay(node, recording, tmp_path, python_participant):
    domain = next(DOMAINS)
    reference = replay_reference(node, recording, tmp_path)
    fusion = start_fusion(node, tmp_path, domain)
    store = dds_peer.typestore()
    messages = dds_peer.read_sensor_messages(recording, store)
    participant = python_participant(domain)
    receiver = dds_peer.Receiver(participant, store)
    publisher = dds_peer.Publisher(participant)
    assert publisher.wait_for_readers(), 'fusion-node never subscribed to imu/data_raw and imu/mag'
    assert receiver.wait_for_writers(), 'fusion-node never published imu/data and heading'
    # A node built against gyrocompass_msgs 0.3.0 (Heading without `reasons`) on a participant of its own.
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    old_participant = python_participant(domain)
    old_reader = DataReader(old_participant, Topic(old_participant, 'rt/heading', dds_peer.HeadingV1),
                            qos=dds_peer.RELIABLE_KEEP_ALL)
    deadline = time.time() + 20
    while old_reader.get_subscription_matched_status().current_count == 0 and time.time() < deadline:
        time.sleep(0.01)
    assert old_reader.get_subscription_matched_status().current_count > 0, 'the version 1 reader never matched'
    time.sleep(1.0)  # this side matched; give the other side's discovery the same chance
    publisher.publish(messages, rate_hz=1000)
    counts = {t: len(v) for t, v in reference.items()}
    got = receiver.collect(counts, timeout=60)
    _, err = fusion.communicate(timeout=60)
    assert fusion.returncode == 0, err
    for topic in reference:
        received = [bytes(b) for b in got[topic]]
        assert len(received) == len(reference[topic]), f'{topic}: {len(received)} of {len(reference[topic])}\n{err}'
        # rosbags serialized each received value; replay recorded its own bytes: identical, frame by frame.
        mismatch = next((i for i, (a, b) in enumerate(zip(received, reference[topic])) if a != b), None)
        assert mismatch is None, f'{topic}: frame {mismatch} differs from replay'
    # The version 1 reader got every heading, each field as the current definition decodes it.
    old = []
    deadline = time.time() + 10
    while len(old) < len(reference['/heading']) and time.time() < deadline:
        old += dds_peer.data_samples(old_reader.take(N=1000))
        time.sleep(0.01)
    assert len(old) == len(reference['/heading'])
    for sample, raw in zip(old, reference['/heading']):
        current = store.deserialize_cdr(raw, 'gyrocompass_msgs/msg/Heading')
        for name in ('magnetic_heading', 'heading_accuracy', 'flags'):
            mine, theirs = getattr(sample, name), getattr(current, name)
            assert mine == theirs or (math.isnan(mine) and math.isnan(theirs)), name


def fastdds_script(recording, path, extra=()):
    lines = ['sub /imu/data sensor_msgs/msg/Imu', 'sub /heading gyrocompass_msgs/msg/Heading', *extra]
    with AnyReader([recording]) as reader:
        for conn, _, raw in reader.messages():
            lines.append(f'pub {conn.topic} {conn.msgtype} {bytes(raw).hex()}')
    path.write_text('\n'.join(lines) + '\n')


def test_fastdds_peer_fuses_like_replay(node, fastdds_peer, recording, tmp_path):
    domain = next(DOMAINS)
    reference = replay_reference(node, recording, tmp_path)
    script = tmp_path / 'script.txt'
    fastdds_script(recording, script)
    fusion = start_fusion(node, tmp_path, domain)
    n = len(reference['/heading'])
    peer = subprocess.run([str(fastdds_peer), str(script), str(n), str(domain), '1000'], capture_output=True,
                          text=True, timeout=120)
    _, err = fusion.communicate(timeout=60)
    assert peer.returncode == 0, peer.stderr + err
    assert fusion.returncode == 0, err
    got = {'/imu/data': [], '/heading': []}
    for line in peer.stdout.splitlines():
        topic, hexed = line.split()
        got[topic].append(bytes.fromhex(hexed))
    store = dds_peer.typestore()
    for topic, msgtype in (('/imu/data', 'sensor_msgs/msg/Imu'), ('/heading', 'gyrocompass_msgs/msg/Heading')):
        assert got[topic] == reference[topic], f'{topic}: {len(got[topic])} of {len(reference[topic])} or bytes differ'
        # The bytes Fast DDS delivered are what rosbags makes of the values they hold.
        for raw in got[topic][:200]:
            assert bytes(store.serialize_cdr(store.deserialize_cdr(raw, msgtype), msgtype)) == raw


def wait_for_line(proc, needle, timeout=15):
    """Reads stderr lines until one contains `needle`; returns everything read."""
    seen = []
    deadline = time.time() + timeout
    os.set_blocking(proc.stderr.fileno(), False)
    while time.time() < deadline:
        line = proc.stderr.readline()
        if line:
            seen.append(line)
            if needle in line:
                return ''.join(seen)
        else:
            time.sleep(0.05)
    return ''.join(seen)


def test_a_publisher_of_another_type_is_named(node, tmp_path, python_participant):
    domain = next(DOMAINS)
    fusion = start_fusion(node, tmp_path, domain)
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic
    participant = python_participant(domain)
    wrong = DataWriter(participant, Topic(participant, 'rt/imu/data_raw', dds_peer.MagneticField))
    try:
        text = wait_for_line(fusion, 'a publisher sends sensor_msgs/msg/MagneticField')
        assert 'this reader expects sensor_msgs/msg/Imu' in text, text
    finally:
        fusion.send_signal(signal.SIGINT)
        fusion.communicate(timeout=10)
    del wrong


def test_a_qos_that_cannot_match_is_named(node, tmp_path, python_participant):
    domain = next(DOMAINS)
    fusion = start_fusion(node, tmp_path, domain, source_qos='reliable')
    from cyclonedds.core import Policy, Qos
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic
    participant = python_participant(domain)
    best_effort = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(5))
    writer = DataWriter(participant, Topic(participant, 'rt/imu/data_raw', dds_peer.Imu), qos=best_effort)
    try:
        text = wait_for_line(fusion, 'asks for reliable')
        assert '/imu/data_raw' in text and 'best_effort' in text, text
    finally:
        fusion.send_signal(signal.SIGINT)
        fusion.communicate(timeout=10)
    del writer


def test_malformed_cdr_from_a_peer_is_counted_and_skipped(node, fastdds_peer, tmp_path):
    domain = next(DOMAINS)
    bag = tmp_path / 'small'
    write_rosbags(bag, [m for m in make_messages(n=200, seed=3) if m[0] != '/fix'], StoragePlugin.MCAP)
    script = tmp_path / 'script.txt'
    fastdds_script(bag, script)
    lines = script.read_text().splitlines()
    # Three damaged IMU messages among the good ones: a stamp cut short, a string length past the end,
    # a body that ends inside the orientation.
    bad = ['000100000100', '00010000' + '01000000' * 2 + 'ffffff7f', '00010000' + '00' * 16 + '0000f03f']
    for k, hexed in enumerate(bad):
        lines.insert(10 + 20 * k, f'pub /imu/data_raw sensor_msgs/msg/Imu {hexed}')
    script.write_text('\n'.join(lines) + '\n')
    fusion = start_fusion(node, tmp_path, domain)
    peer = subprocess.run([str(fastdds_peer), str(script), '199', str(domain), '1000'], capture_output=True,
                          text=True, timeout=120)
    _, err = fusion.communicate(timeout=60)
    assert peer.returncode == 0, peer.stderr + err
    assert fusion.returncode == 3, err  # finished, with loss reported
    assert err.count('malformed message skipped') == 3, err
    assert '3 malformed skipped' in err, err


def test_sigint_leaves_the_domain_at_once(node, tmp_path, python_participant):
    domain = next(DOMAINS)
    fusion = start_fusion(node, tmp_path, domain)
    participant = python_participant(domain)
    receiver = dds_peer.Receiver(participant, dds_peer.typestore())
    assert receiver.wait_for_writers()
    fusion.send_signal(signal.SIGINT)
    stopped = time.time()
    _, err = fusion.communicate(timeout=10)
    assert fusion.returncode == 130, err
    assert time.time() - stopped < 2.0
    # Its writers are gone from the domain now, not after a lease of seconds.
    reader = receiver.readers['/heading'][0]
    deadline = time.time() + 1.0
    while reader.get_subscription_matched_status().current_count > 0 and time.time() < deadline:
        time.sleep(0.01)
    assert reader.get_subscription_matched_status().current_count == 0


def test_ros2_echo_prints_what_replay_publishes(node, tmp_path):
    domain = next(DOMAINS)
    bag = tmp_path / 'small'
    write_rosbags(bag, [m for m in make_messages(n=300, seed=9) if m[0] != '/fix'], StoragePlugin.MCAP)
    echo = subprocess.Popen([str(node), 'ros2', 'echo', '/heading', '--type', 'gyrocompass_msgs/msg/Heading',
                             '--qos', 'reliable, keep_all', '--domain-id', str(domain), '--count', '299'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    replay = subprocess.run([str(node), 'replay', str(bag), '--ros2', '--domain-id', str(domain),
                             '--wait-for-subscribers', '1', '--quiet'], capture_output=True, text=True, timeout=60)
    assert replay.returncode == 0, replay.stderr
    out, err = echo.communicate(timeout=30)
    assert echo.returncode == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert len(lines) == 299
    reference = subprocess.run([str(node), 'replay', str(bag), '--accuracy-csv', str(tmp_path / 'acc.csv'),
                                '--quiet'], capture_output=True, text=True)
    assert reference.returncode == 0
    rows = [r.split(',') for r in (tmp_path / 'acc.csv').read_text().splitlines()[1:]]
    for line, row in zip(lines, rows):
        assert line['topic'] == '/heading' and line['type'] == 'gyrocompass_msgs/msg/Heading'
        assert abs(line['message']['magnetic_heading'] - float(row[1])) < 1e-4  # the CSV keeps 4 decimals


def test_endpoints_announce_the_type_hash_jazzy_expects(node, tmp_path, python_participant):
    """Every endpoint's user data carries "typehash=RIHS01_...;" as rmw on Jazzy does, equal to what
    rosbags (an independent implementation of REP-2011) computes."""
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication, BuiltinTopicDcpsSubscription
    from cyclonedds.core import Policy
    domain = next(DOMAINS)
    fusion = start_fusion(node, tmp_path, domain, extra_sink='    publish_tf: true\n')
    participant = python_participant(domain)
    store = dds_peer.typestore()
    wanted = {('pub', 'rt/imu/data'): 'sensor_msgs/msg/Imu', ('pub', 'rt/heading'): 'gyrocompass_msgs/msg/Heading',
              ('pub', 'rt/heading/quaternion'): 'geometry_msgs/msg/QuaternionStamped',
              ('pub', 'rt/tf'): 'tf2_msgs/msg/TFMessage', ('sub', 'rt/imu/data_raw'): 'sensor_msgs/msg/Imu',
              ('sub', 'rt/imu/mag'): 'sensor_msgs/msg/MagneticField'}
    seen = {}
    readers = {'pub': BuiltinDataReader(participant, BuiltinTopicDcpsPublication),
               'sub': BuiltinDataReader(participant, BuiltinTopicDcpsSubscription)}
    try:
        deadline = time.time() + 15
        while len(seen) < len(wanted) and time.time() < deadline:
            for kind, reader in readers.items():
                for sample in dds_peer.data_samples(reader.take(N=100)):
                    key = (kind, sample.topic_name)
                    if key in wanted:
                        seen[key] = (sample.type_name, bytes(sample.qos[Policy.Userdata].data))
            time.sleep(0.05)
    finally:
        fusion.send_signal(signal.SIGINT)
        fusion.communicate(timeout=10)
    assert set(seen) == set(wanted)
    for key, msgtype in wanted.items():
        type_name, user_data = seen[key]
        pkg, kind, name = msgtype.split('/')
        assert type_name == f'{pkg}::{kind}::dds_::{name}_'
        assert user_data == f'typehash={store.hash_rihs01(msgtype)};'.encode(), key


def test_health_reaches_diagnostics_as_diagnostic_array(node, tmp_path, python_participant):
    """A real-time simulator with an uncalibrated magnetometer through calibration, fusion and ros2_sink: a
    Python cyclonedds reader of /diagnostics (diagnostic_msgs/msg/DiagnosticArray, as diagnostic_aggregator
    reads it) gets the heading, calibration and interference statuses, the calibration first a warning
    while it collects and OK once accepted."""
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    domain = next(DOMAINS)
    participant = python_participant(domain)
    reader = DataReader(participant, Topic(participant, 'rt/diagnostics', dds_peer.DiagnosticArray))
    config = tmp_path / 'health.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, scenario: figure_eight, duration_s: 12, realtime: true, hard_iron_ut: [12, -20, 6]}}
  calibration: {{type: calibration, inputs: [sim], online: true}}
  fusion: {{type: fusion, inputs: [calibration]}}
  out: {{type: ros2_sink, inputs: [fusion], domain_id: {domain}, diagnostics_period_s: 0.5}}
""")
    fusion = subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.PIPE, text=True)
    arrays, deadline = [], time.time() + 45
    try:
        while time.time() < deadline and fusion.poll() is None:
            arrays += dds_peer.data_samples(reader.take(N=100))
            time.sleep(0.1)
        arrays += dds_peer.data_samples(reader.take(N=100))
    finally:
        fusion.terminate()
        _, err = fusion.communicate(timeout=30)
    assert len(arrays) >= 12, (len(arrays), err)   # 12 s at 0.5 s
    by_name = {}
    for a in arrays:
        for s in a.status:
            by_name.setdefault(s.name, []).append(s)
    assert {'gyrocompass: heading', 'gyrocompass: magnetometer calibration',
            'gyrocompass: magnetic interference'} <= set(by_name), set(by_name)
    calibration = by_name['gyrocompass: magnetometer calibration']
    assert calibration[0].level == 1 and calibration[-1].level == 0, [(s.level, s.message) for s in calibration]
    assert calibration[-1].message == 'calibrated'
    heading = by_name['gyrocompass: heading'][-1]
    keys = {kv.key: kv.value for kv in heading.values}
    assert heading.level == 0 and float(keys['95 % accuracy (deg)']) < 10, (heading.message, keys)
    assert heading.hardware_id == 'imu_link'


def test_the_mounting_comes_from_a_live_tf_static(node, recording, tmp_path, python_participant):
    """A static broadcaster says, before fusion-node joins (transient local), that the IMU board is mounted
    yaw_90 on base_link. The ros2 source reads /tf_static, the mount stage turns the sensors by it, and the
    headings are those of the recording replayed straight (the board's readings were turned as if mounted
    so with tools/rotate_bag.sh)."""
    import math
    domain = next(DOMAINS)
    turned = tmp_path / 'turned.mcap'
    r = subprocess.run(['bash', str(ROOT / 'tools' / 'rotate_bag.sh'), str(recording), str(turned),
                        '--imu', 'yaw_90', '--mag', 'yaw_90'], capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'FUSION_NODE': str(node)})
    assert r.returncode == 0, r.stderr
    store = dds_peer.typestore()
    reference = [store.deserialize_cdr(b, 'gyrocompass_msgs/msg/Heading').magnetic_heading
                 for b in replay_reference(node, recording, tmp_path)['/heading']]
    participant = python_participant(domain)
    # yaw_90 is the board's x axis pointing right: -90 degrees about z, as URDF writes it.
    latched = dds_peer.static_transforms(participant, [('base_link', 'imu_link',
                                                        (0.0, 0.0, -math.sin(math.pi / 4), math.cos(math.pi / 4)))])
    config = tmp_path / 'tf.yaml'
    config.write_text(f"""name: ros2-tf
stages:
  dds: {{type: ros2_source, domain_id: {domain}, qos: 'reliable, keep_all', tf_topic: /tf_static,
         end_after_idle_s: 3}}
  mount: {{type: mount, inputs: [dds], imu_rotation: tf, mag_rotation: tf}}
  fusion: {{type: fusion, inputs: [mount]}}
  out: {{type: ros2_sink, inputs: [fusion], domain_id: {domain}, qos: 'reliable, keep_all'}}
""")
    fusion = subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.PIPE, text=True)
    receiver = dds_peer.Receiver(participant, store)
    publisher = dds_peer.Publisher(participant)
    assert publisher.wait_for_readers(), 'fusion-node never subscribed'
    assert receiver.wait_for_writers(), 'fusion-node never published imu/data and heading'
    time.sleep(1.0)
    publisher.publish(dds_peer.read_sensor_messages(turned, store), rate_hz=1000)
    got = receiver.collect({'/imu/data': len(reference), '/heading': len(reference)}, timeout=60)
    _, err = fusion.communicate(timeout=60)
    del latched
    assert fusion.returncode == 0, err
    assert 'imu_link to base_link is [0, 0, -90] deg (imu_link -> base_link)' in err, err
    headings = [store.deserialize_cdr(bytes(b), 'gyrocompass_msgs/msg/Heading').magnetic_heading
                for b in got['/heading']]
    assert len(headings) == len(reference), f'{len(headings)} of {len(reference)}\n{err}'
    worst = max(abs((a - b + 180) % 360 - 180) for a, b in zip(headings, reference))
    assert worst < 1e-6, worst


def heading_rmse(headings, truth, skip):
    """RMS of magnetic heading minus the truth file's (the simulator's truth_path), degrees, from sample
    `skip` on; the headings and the truth rows are one per IMU sample."""
    import csv, math
    with open(truth) as f:
        rows = list(csv.DictReader(f))

    def compass(qw, qx, qy, qz):
        return math.degrees(math.atan2(1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy + qw * qz)))
    errors = [(h.magnetic_heading - compass(*(float(row[k]) for k in ('qw', 'qx', 'qy', 'qz'))) + 180) % 360 - 180
              for h, row in zip(headings[skip:], rows[skip:])]
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def test_gnss_velocity_aids_the_heading_over_dds(node, tmp_path, python_participant):
    """A receiver's velocity (geometry_msgs/TwistWithCovarianceStamped on gnss/velocity) from a Python peer,
    with the IMU and magnetometer of the simulator's drive: the ros2 source reads it (velocity_topic), the
    fusion stage aids the heading with it, /diagnostics carries the GNSS status, and the headings match the
    truth as closely as a replay of the same recording with --velocity-topic."""
    domain = next(DOMAINS)
    bag, truth = tmp_path / 'drive.mcap', tmp_path / 'drive-truth.csv'
    r = subprocess.run([str(node), '--config', str(ROOT / 'Pipelines' / 'simulate-drive.yaml')], capture_output=True,
                       text=True, timeout=120,
                       env={**os.environ, 'SEED': '2', 'DURATION': '60', 'OUT': str(bag), 'TRUTH': str(truth)})
    assert r.returncode == 0, r.stderr
    config = tmp_path / 'gnss.yaml'
    config.write_text(f"""name: ros2-gnss
stages:
  dds: {{type: ros2_source, domain_id: {domain}, qos: 'reliable, keep_all', velocity_topic: gnss/velocity,
         end_after_idle_s: 3}}
  fusion: {{type: fusion, inputs: [dds]}}
  out: {{type: ros2_sink, inputs: [fusion], domain_id: {domain}, qos: 'reliable, keep_all'}}
""")
    fusion = subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.PIPE, text=True)
    store = dds_peer.typestore()
    participant = python_participant(domain)
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    diagnostics = DataReader(participant, Topic(participant, 'rt/diagnostics', dds_peer.DiagnosticArray))
    receiver = dds_peer.Receiver(participant, store)
    publisher = dds_peer.Publisher(participant, extra=[('gnss/velocity', dds_peer.TwistWithCovarianceStamped)])
    assert publisher.wait_for_readers(), 'fusion-node never subscribed'
    assert receiver.wait_for_writers(), 'fusion-node never published imu/data and heading'
    time.sleep(1.0)
    messages = dds_peer.read_sensor_messages(bag, store, extra=('/gnss/velocity',))
    velocities = sum(1 for m in messages if m[0] == '/gnss/velocity')
    assert velocities == 600, velocities
    publisher.publish(messages, rate_hz=1000)
    got = receiver.collect({'/heading': 6000}, timeout=60)
    statuses = []
    end = time.time() + 10
    while time.time() < end and fusion.poll() is None:
        statuses += dds_peer.data_samples(diagnostics.take(N=100))
        time.sleep(0.05)
    _, err = fusion.communicate(timeout=60)
    statuses += dds_peer.data_samples(diagnostics.take(N=100))
    assert fusion.returncode == 0, err
    assert 'gnss: velocity 600,' in err, err
    headings = [store.deserialize_cdr(bytes(b), 'gyrocompass_msgs/msg/Heading') for b in got['/heading']]
    assert len(headings) == 6000, len(headings)
    rmse = heading_rmse(headings, truth, skip=100)
    assert rmse < 1.0, rmse
    aided = sum(1 for h in headings if h.flags & 16384)
    assert aided > 1000, aided
    gnss = [s for array in statuses for s in array.status if s.name == 'gyrocompass: gnss aiding']
    assert gnss and any(s.level == 0 and s.message == 'GNSS holds the heading' for s in gnss), \
        [(s.level, s.message) for s in gnss]


def test_a_second_magnetometer_over_dds_outvotes_a_disturbed_primary(node, tmp_path, python_participant):
    """Two magnetometers published by a Python peer (imu/mag, and imu/mag/mast read by ros2_source's
    extra_magnetometers), from a simulator recording with a magnet arriving at the primary after 10 s: the
    fusion stage fuses both, outvotes the primary once the magnet turns it, and the headings stay close to
    the truth."""
    domain = next(DOMAINS)
    bag, truth = tmp_path / 'two.mcap', tmp_path / 'two-truth.csv'
    record = tmp_path / 'record.yaml'
    record.write_text(f"""
stages:
  sim: {{type: simulator, scenario: figure_eight, duration_s: 40, realtime: false, extra_magnetometers: [mast],
         magnet_ut: [8, 4, 0], magnet_start_s: 10, magnet_duration_s: 60, truth_path: '{truth}'}}
  rec: {{type: record, inputs: [sim], path: '{bag}', topics: [imu/data_raw, imu/mag, imu/mag/mast]}}
""")
    r = subprocess.run([str(node), '--config', str(record)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    config = tmp_path / 'two-dds.yaml'
    config.write_text(f"""name: ros2-two-magnetometers
stages:
  dds: {{type: ros2_source, domain_id: {domain}, qos: 'reliable, keep_all', extra_magnetometers: [mast=imu/mag/mast],
         end_after_idle_s: 3}}
  fusion: {{type: fusion, inputs: [dds]}}
  out: {{type: ros2_sink, inputs: [fusion], domain_id: {domain}, qos: 'reliable, keep_all'}}
""")
    fusion = subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.PIPE, text=True)
    store = dds_peer.typestore()
    participant = python_participant(domain)
    receiver = dds_peer.Receiver(participant, store)
    publisher = dds_peer.Publisher(participant, extra=[('imu/mag/mast', dds_peer.MagneticField)])
    assert publisher.wait_for_readers(), 'fusion-node never subscribed'
    assert receiver.wait_for_writers(), 'fusion-node never published imu/data and heading'
    time.sleep(1.0)
    messages = dds_peer.read_sensor_messages(bag, store, extra=('/imu/mag/mast',))
    assert sum(1 for m in messages if m[0] == '/imu/mag/mast') == 4000
    publisher.publish(messages, rate_hz=1000)
    got = receiver.collect({'/heading': 4000}, timeout=60)
    _, err = fusion.communicate(timeout=60)
    assert fusion.returncode == 0, err
    assert 'magnetometer mag outvoted' in err, err
    assert 'mast: 3999 reading(s)' in err or 'mast: 4000 reading(s)' in err, err
    headings = [store.deserialize_cdr(bytes(b), 'gyrocompass_msgs/msg/Heading') for b in got['/heading']]
    assert len(headings) == 4000, len(headings)
    rmse = heading_rmse(headings, truth, skip=500)
    assert rmse < 1.0, rmse


def test_ros2_echo_of_a_misspelt_topic_suggests_the_one_published(node):
    """`ros2 echo /imu/mags` beside a publisher of /imu/mag: the wait names the nearest topic discovery sees,
    then gives up at --timeout (exit 1)."""
    domain = next(DOMAINS)
    sensor = subprocess.Popen([str(node), '--config', str(ROOT / 'Pipelines' / 'ros2-simulated-sensor.yaml')],
                              env={**os.environ, 'ROS_DOMAIN_ID': str(domain), 'DURATION': '15'},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = subprocess.run([str(node), 'ros2', 'echo', '/imu/mags', '--domain-id', str(domain), '--timeout', '7'],
                           capture_output=True, text=True, timeout=60)
    finally:
        sensor.terminate()
        sensor.wait(timeout=30)
    assert r.returncode == 1, r.stderr
    assert "(did you mean '/imu/mag'?)" in r.stderr and 'giving up' in r.stderr, r.stderr
