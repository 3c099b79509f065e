import re
"""Bag interoperability with the reference Python implementations, through the real fusion-node binary.

- Bags written by `rosbags` (rosbag2: MCAP uncompressed, MCAP zstd chunks, sqlite3) and by the `mcap`
  library (lz4 chunks; rosbags cannot write lz4) read back through `fusion-node bag echo` with every
  field identical.
- Bags recorded by `fusion-node replay --record` (MCAP zstd/lz4/none, sqlite3) read back with `rosbags`
  (decoding gyrocompass_msgs/msg/Heading from the schema embedded in the file) and with the `mcap`
  library (CRCs validated), message for message identical to what fusion-node itself reads.
Everything is generated here, seeded; no shared data is used.
"""
import json, math, subprocess
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer as McapWriter
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

ROOT = Path(__file__).resolve().parents[2]
STORE = get_typestore(Stores.ROS2_HUMBLE)
Imu = STORE.types['sensor_msgs/msg/Imu']
MagneticField = STORE.types['sensor_msgs/msg/MagneticField']
NavSatFix = STORE.types['sensor_msgs/msg/NavSatFix']
NavSatStatus = STORE.types['sensor_msgs/msg/NavSatStatus']
Header = STORE.types['std_msgs/msg/Header']
Time = STORE.types['builtin_interfaces/msg/Time']
Quaternion = STORE.types['geometry_msgs/msg/Quaternion']
Vector3 = STORE.types['geometry_msgs/msg/Vector3']


@pytest.fixture(scope='session')
def node():
    bin_path = subprocess.run(['swift', 'build', '--show-bin-path'], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout.strip()
    path = Path(bin_path) / 'fusion-node'
    if not path.exists():
        subprocess.run(['swift', 'build', '--product', 'fusion-node'], cwd=ROOT, check=True)
    return path


def make_messages(n=400, seed=7):
    """A turning sensor at 100 Hz: (topic, msgtype, log time ns, message) in time order."""
    rng = np.random.default_rng(seed)
    out = []
    field = np.array([0.0, 19.5e-6, -43.9e-6])
    for k in range(n):
        t_ns = 1_700_000_000_000_000_000 + k * 10_000_000
        header = Header(stamp=Time(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id='imu_link')
        yaw = 0.3 * k / 100
        c, s = math.cos(yaw), math.sin(yaw)
        mag_body = np.array([c * field[0] + s * field[1], -s * field[0] + c * field[1], field[2]]) + rng.normal(0, 2e-7, 3)
        imu = Imu(header=header, orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0),
                  orientation_covariance=np.array([-1.0] + [0.0] * 8),
                  angular_velocity=Vector3(x=float(rng.normal(0, 1e-3)), y=float(rng.normal(0, 1e-3)), z=0.3 + float(rng.normal(0, 1e-3))),
                  angular_velocity_covariance=np.zeros(9),
                  linear_acceleration=Vector3(x=float(rng.normal(0, 0.02)), y=float(rng.normal(0, 0.02)), z=9.81 + float(rng.normal(0, 0.02))),
                  linear_acceleration_covariance=np.zeros(9))
        mag = MagneticField(header=header, magnetic_field=Vector3(x=float(mag_body[0]), y=float(mag_body[1]), z=float(mag_body[2])),
                            magnetic_field_covariance=np.full(9, 1e-14))
        out.append(('/imu/data_raw', 'sensor_msgs/msg/Imu', t_ns, imu))
        out.append(('/imu/mag', 'sensor_msgs/msg/MagneticField', t_ns, mag))
        if k % 10 == 0:
            fix = NavSatFix(header=header, status=NavSatStatus(status=0, service=1), latitude=52.5 + k * 1e-6,
                            longitude=13.4, altitude=35.0, position_covariance=np.full(9, 2.0), position_covariance_type=2)
            out.append(('/fix', 'sensor_msgs/msg/NavSatFix', t_ns, fix))
    return out


def write_rosbags(path, messages, plugin, zstd_chunks=False):
    writer = Writer(path, version=9, storage_plugin=plugin)
    if zstd_chunks:
        # For the MCAP plugin, storage compression means zstd-compressed chunks.
        writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with writer:
        conns = {}
        for topic, msgtype, t, msg in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=STORE)
            writer.write(conns[topic], t, STORE.serialize_cdr(msg, msgtype))


def write_mcap_lz4(path, messages):
    write_mcap(path, messages, compression=CompressionType.LZ4, chunk_size=16384)


def write_mcap(path, messages, **writer_options):
    """A ROS 2 profile MCAP written by the `mcap` library with the given writer options."""
    with open(path, 'wb') as f:
        w = McapWriter(f, **writer_options)
        w.start(profile='ros2', library='test')
        channels = {}
        for topic, msgtype, t, msg in messages:
            if topic not in channels:
                schema = w.register_schema(msgtype, 'ros2msg', STORE.generate_msgdef(msgtype)[0].encode())
                channels[topic] = w.register_channel(topic, 'cdr', schema)
            w.add_message(channels[topic], t, STORE.serialize_cdr(msg, msgtype), t)
        w.finish()


def echo(node, bag):
    out = subprocess.run([str(node), 'bag', 'echo', str(bag)], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def close(a, b):
    return (a is None and isinstance(b, float) and math.isnan(b)) or a == b


def check_same(expected, echoed):
    assert len(echoed) == len(expected)
    for (topic, msgtype, t, msg), e in zip(expected, echoed):
        assert (e['topic'], e['type'], e['log_time']) == (topic, msgtype, t)
        m = e['message']
        assert m['header'] == {'stamp': {'sec': msg.header.stamp.sec, 'nanosec': msg.header.stamp.nanosec}, 'frame_id': 'imu_link'}
        if msgtype == 'sensor_msgs/msg/Imu':
            for name in ('angular_velocity', 'linear_acceleration'):
                v = getattr(msg, name)
                assert [m[name]['x'], m[name]['y'], m[name]['z']] == [v.x, v.y, v.z]
            assert m['orientation_covariance'] == list(msg.orientation_covariance)
        elif msgtype == 'sensor_msgs/msg/MagneticField':
            v = msg.magnetic_field
            assert [m['magnetic_field']['x'], m['magnetic_field']['y'], m['magnetic_field']['z']] == [v.x, v.y, v.z]
            assert m['magnetic_field_covariance'] == list(msg.magnetic_field_covariance)
        else:
            assert (m['latitude'], m['longitude'], m['altitude']) == (msg.latitude, msg.longitude, msg.altitude)
            assert m['status'] == {'status': 0, 'service': 1} and m['position_covariance_type'] == 2


@pytest.mark.parametrize('kind', ['mcap-none', 'mcap-zstd', 'sqlite3'])
def test_rosbags_written_bags_read_identically(node, tmp_path, kind):
    messages = make_messages()
    bag = tmp_path / 'bag'
    plugin = StoragePlugin.SQLITE3 if kind == 'sqlite3' else StoragePlugin.MCAP
    write_rosbags(bag, messages, plugin, zstd_chunks=(kind == 'mcap-zstd'))
    echoed = echo(node, bag)
    # sqlite3 orders by timestamp; equal stamps keep insertion order (ORDER BY timestamp, id).
    check_same(messages, echoed)
    info = subprocess.run([str(node), 'bag', 'info', str(bag)], check=True, capture_output=True, text=True).stdout
    assert f'Messages:          {len(messages)}' in info
    assert 'Topic: /imu/data_raw | Type: sensor_msgs/msg/Imu | Count: 400 | Rate: 100.000 Hz' in info


def test_mcap_library_lz4_chunks_read_identically(node, tmp_path):
    messages = make_messages(seed=8)
    path = tmp_path / 'lz4.mcap'
    write_mcap_lz4(path, messages)
    check_same(messages, echo(node, path))


@pytest.mark.parametrize('target', ['dir-zstd', 'dir-lz4', 'dir-none', 'dir-sqlite3', 'file.mcap', 'file.db3'])
def test_recorded_bags_read_by_rosbags_and_mcap(node, tmp_path, target):
    source = tmp_path / 'input'
    write_rosbags(source, make_messages(n=600, seed=9), StoragePlugin.MCAP, zstd_chunks=True)
    out = tmp_path / ('rec.mcap' if target == 'file.mcap' else 'rec.db3' if target == 'file.db3' else 'rec')
    args = [str(node), 'replay', str(source), '--record', str(out), '--quiet']
    if target.startswith('dir-'):
        kind = target[4:]
        args += ['--storage', 'sqlite3'] if kind == 'sqlite3' else ['--compression', kind]
    subprocess.run(args, check=True)
    ours = echo(node, out)
    assert len(ours) == 2 * 600
    assert {m['topic'] for m in ours} == {'/heading', '/imu/data'}
    headings = [m['message'] for m in ours if m['topic'] == '/heading']
    assert all(0 <= h['magnetic_heading'] < 360 for h in headings)
    assert headings[-1]['heading_accuracy'] is not None and headings[0]['flags'] & 1  # initialising at first

    if target.startswith('dir-'):
        # rosbags reads the rosbag2 directory and decodes our own type from the embedded definition.
        with AnyReader([out]) as reader:
            theirs = []
            for conn, t, raw in reader.messages():
                msg = reader.deserialize(raw, conn.msgtype)
                theirs.append((conn.topic, t, msg))
        assert len(theirs) == len(ours)
        for (topic, t, msg), e in zip(theirs, ours):
            assert (topic, t) == (e['topic'], e['log_time'])
            m = e['message']
            if topic == '/heading':
                assert close(m['magnetic_heading'], msg.magnetic_heading)
                assert close(m['heading_accuracy'], msg.heading_accuracy)
                assert m['flags'] == msg.flags and m['source'] == msg.source
                assert [m['orientation'][k] for k in 'xyzw'] == [msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w]
                assert msg.FLAG_MAGNETOMETER_REJECTED == 8
            else:
                assert [m['orientation'][k] for k in 'xyzw'] == [msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w]
                assert m['orientation_covariance'] == list(msg.orientation_covariance)

    mcap_files = [out] if target == 'file.mcap' else list(out.glob('*.mcap')) if out.is_dir() else []
    for path in mcap_files:
        with open(path, 'rb') as f:
            reader = make_reader(f, validate_crcs=True)
            summary = reader.get_summary()
            assert summary.statistics.message_count == len(ours)
            got = [(channel.topic, message.log_time, message.data) for schema, channel, message in reader.iter_messages(log_time_order=False)]
        assert [(t, lt) for t, lt, _ in got] == [(e['topic'], e['log_time']) for e in ours]
        heading = STORE.deserialize_cdr(got[0][2], 'sensor_msgs/msg/Imu') if got[0][0] == '/imu/data' else None
        assert heading is None or heading.header.frame_id == 'imu_link'


def test_damaged_bag_is_reported_not_fatal(node, tmp_path):
    # Many small chunks (the mcap library's writer), then cut the file two thirds of the way in.
    mcap_file = tmp_path / 'many-chunks.mcap'
    write_mcap_lz4(mcap_file, make_messages(n=2000, seed=3))
    data = bytearray(mcap_file.read_bytes())
    cut = tmp_path / 'cut.mcap'
    cut.write_bytes(bytes(data[: len(data) * 2 // 3]))
    strict = subprocess.run([str(node), 'bag', 'echo', str(cut)], capture_output=True, text=True)
    assert strict.returncode != 0 and 'cut.mcap' in strict.stderr and 'byte' in strict.stderr
    assert '--salvage' in strict.stderr      # the error says how to read what is intact
    salvaged = subprocess.run([str(node), 'bag', 'echo', str(cut), '--salvage'], capture_output=True, text=True)
    assert salvaged.returncode == 0 and 'damage' in salvaged.stderr
    assert 0 < len(salvaged.stdout.splitlines()) < len(make_messages(n=2000, seed=3))


def test_unchunked_mcap_reads_identically(node, tmp_path):
    """MCAP without chunks (messages directly in the data section), written by the mcap library."""
    messages = make_messages(n=200, seed=12)
    path = tmp_path / 'flat.mcap'
    write_mcap(path, messages, use_chunking=False)
    check_same(messages, echo(node, path))


def test_unknown_types_are_decoded_through_the_bags_schema(node, tmp_path):
    """bag echo renders any type the bag defines, here geometry_msgs/msg/PoseStamped, as JSON."""
    Pose = STORE.types['geometry_msgs/msg/PoseStamped']
    Point = STORE.types['geometry_msgs/msg/Point']
    PoseOnly = STORE.types['geometry_msgs/msg/Pose']
    bag = tmp_path / 'poses'
    writer = Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP)
    with writer:
        conn = writer.add_connection('/pose', 'geometry_msgs/msg/PoseStamped', typestore=STORE)
        for k in range(5):
            msg = Pose(header=Header(stamp=Time(sec=100 + k, nanosec=5), frame_id='map'),
                       pose=PoseOnly(position=Point(x=1.5 * k, y=-2.0, z=0.25), orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)))
            writer.write(conn, (100 + k) * 10**9 + 5, STORE.serialize_cdr(msg, 'geometry_msgs/msg/PoseStamped'))
    echoed = echo(node, bag)
    assert len(echoed) == 5
    m = echoed[3]['message']
    assert m['header'] == {'stamp': {'sec': 103, 'nanosec': 5}, 'frame_id': 'map'}
    assert m['pose']['position'] == {'x': 4.5, 'y': -2.0, 'z': 0.25}
    assert m['pose']['orientation']['w'] == 1.0


EMPTY_AND_BOOL_MSG = """
std_msgs/Empty nothing
bool flag
OnlyConstants constants
string after
bool[] flags
int32[] numbers
"""


def test_nested_messages_without_fields_and_booleans_decode_as_rosbags_does(node, tmp_path):
    """An empty nested message takes one byte in ROS 2 CDR (structure_needs_at_least_one_member), so
    every field after it depends on reading it; booleans come out as JSON booleans."""
    from rosbags.typesys import get_types_from_msg
    store = get_typestore(Stores.ROS2_HUMBLE)
    types = get_types_from_msg(EMPTY_AND_BOOL_MSG, 'test_msgs/msg/WithEmpty')
    types.update(get_types_from_msg('uint8 A=1\nstring B="x"\n', 'test_msgs/msg/OnlyConstants'))
    store.register(types)
    WithEmpty, Empty = store.types['test_msgs/msg/WithEmpty'], store.types['std_msgs/msg/Empty']
    Constants = store.types['test_msgs/msg/OnlyConstants']
    bag = tmp_path / 'empty'
    writer = Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP)
    sent = []
    with writer:
        conn = writer.add_connection('/with_empty', 'test_msgs/msg/WithEmpty', typestore=store)
        for k in range(4):
            msg = WithEmpty(nothing=Empty(), flag=bool(k % 2), constants=Constants(), after=f'after {k}',
                            flags=np.array([True, k > 1, False]), numbers=np.array([k, -k, 7 * k], dtype=np.int32))
            sent.append(msg)
            writer.write(conn, (50 + k) * 10**9, store.serialize_cdr(msg, 'test_msgs/msg/WithEmpty'))
    echoed = echo(node, bag)
    assert len(echoed) == 4
    for msg, line in zip(sent, echoed):
        m = line['message']
        assert m['nothing'] == {} and m['constants'] == {}
        assert m['flag'] is msg.flag
        assert m['after'] == msg.after
        assert m['flags'] == [bool(x) for x in msg.flags]
        assert m['numbers'] == [int(x) for x in msg.numbers]


def test_a_sqlite3_bag_without_definitions_decodes_through_the_known_interfaces(node, tmp_path):
    """Older rosbag2 versions store no message definitions; the common interface packages are known."""
    String, Twist = STORE.types['std_msgs/msg/String'], STORE.types['geometry_msgs/msg/TwistStamped']
    Vector3 = STORE.types['geometry_msgs/msg/Vector3']
    TwistOnly = STORE.types['geometry_msgs/msg/Twist']
    bag = tmp_path / 'old'
    writer = Writer(bag, version=8, storage_plugin=StoragePlugin.SQLITE3)
    with writer:
        text = writer.add_connection('/chatter', 'std_msgs/msg/String', typestore=STORE)
        twist = writer.add_connection('/cmd', 'geometry_msgs/msg/TwistStamped', typestore=STORE)
        writer.write(text, 1, STORE.serialize_cdr(String(data='hello ROS 1 tools'), 'std_msgs/msg/String'))
        msg = Twist(header=Header(stamp=Time(sec=3, nanosec=4), frame_id='base'),
                    twist=TwistOnly(linear=Vector3(x=1.0, y=2.0, z=3.0), angular=Vector3(x=0.0, y=0.0, z=0.5)))
        writer.write(twist, 2, STORE.serialize_cdr(msg, 'geometry_msgs/msg/TwistStamped'))
    import sqlite3
    db = next(bag.glob('*.db3'))
    with sqlite3.connect(db) as c:            # as rosbag2 before Iron wrote it: no definitions at all
        c.execute('DROP TABLE IF EXISTS message_definitions')
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert 'message_definitions' not in tables          # really a bag without definitions
    echoed = echo(node, bag)
    assert echoed[0]['message'] == {'data': 'hello ROS 1 tools'}
    assert echoed[1]['message']['twist']['linear'] == {'x': 1.0, 'y': 2.0, 'z': 3.0}
    assert echoed[1]['message']['header']['frame_id'] == 'base'


@pytest.mark.parametrize('damage', ['negated_timestamps', 'unknown_topic_id', 'deleted_rows', 'file_listed_twice'])
def test_a_damaged_sqlite3_bag_is_named_never_read_as_complete(node, tmp_path, damage):
    """Rows a replay cannot use, rows missing against metadata.yaml's counts, or a file listed twice: an
    error that names the damage, and with --salvage what is intact plus the damage listed."""
    import sqlite3
    bag = tmp_path / 'bag'
    write_rosbags(bag, make_messages(n=300, seed=9), StoragePlugin.SQLITE3)
    db = next(bag.glob('*.db3'))
    con = sqlite3.connect(db)
    total = con.execute('SELECT COUNT(*) FROM messages').fetchone()[0]
    expect = {'negated_timestamps': 'negative timestamp', 'unknown_topic_id': 'topic_id the topics table',
              'deleted_rows': 'missing (removed or unreadable)', 'file_listed_twice': 'more than once'}[damage]
    if damage == 'negated_timestamps':
        con.execute('UPDATE messages SET timestamp = -timestamp')
    elif damage == 'unknown_topic_id':
        con.execute('UPDATE messages SET topic_id = 999 WHERE id % 10 = 0')
    elif damage == 'deleted_rows':
        con.execute('DELETE FROM messages WHERE id > 250')
    else:
        meta = (bag / 'metadata.yaml').read_text()
        item = re.search(r'relative_file_paths:\n(\s*- [^\n]+\n)', meta).group(1)
        (bag / 'metadata.yaml').write_text(meta.replace(item, item + item, 1))
    con.commit()
    con.close()
    strict = subprocess.run([str(node), 'bag', 'echo', str(bag)], capture_output=True, text=True, timeout=60)
    assert strict.returncode != 0 and expect in strict.stderr, strict.stderr
    if damage == 'file_listed_twice':
        return                                     # the bag cannot be opened: nothing to salvage
    salvaged = subprocess.run([str(node), 'bag', 'echo', str(bag), '--salvage'], capture_output=True, text=True,
                              timeout=60)
    assert salvaged.returncode == 0 and expect in salvaged.stderr, salvaged.stderr
    assert len(salvaged.stdout.splitlines()) < total
    assert len(salvaged.stdout.splitlines()) > 0 or damage == 'negated_timestamps'


def test_a_chunk_listed_twice_in_the_summary_is_read_once(node, tmp_path):
    """The summary's chunk index says where chunks are; listing one twice must not double its messages."""
    import struct
    path = tmp_path / 'dup.mcap'
    write_mcap(path, make_messages(n=400, seed=12), chunk_size=8192)
    b = path.read_bytes()
    footer = len(b) - 8 - (1 + 8 + 20)
    assert b[footer] == 0x02
    summary_start, offsets_start = struct.unpack('<QQ', b[footer + 9:footer + 25])
    summary_end = offsets_start or footer
    records, pos = [], summary_start
    while pos < summary_end:
        (length,) = struct.unpack('<Q', b[pos + 1:pos + 9])
        records.append(b[pos:pos + 9 + length])
        pos += 9 + length
    first_index = next(i for i, r in enumerate(records) if r[0] == 0x08)
    records.insert(first_index, records[first_index])
    summary = b''.join(records)
    new_footer = bytes([0x02]) + struct.pack('<QQQI', 20, summary_start, 0, 0)
    damaged = tmp_path / 'dup2.mcap'
    damaged.write_bytes(b[:summary_start] + summary + new_footer + b[-8:])
    plain = subprocess.run([str(node), 'bag', 'echo', str(path)], capture_output=True, text=True)
    twice = subprocess.run([str(node), 'bag', 'echo', str(damaged)], capture_output=True, text=True)
    assert plain.returncode == 0 and twice.returncode == 0, twice.stderr
    assert len(twice.stdout.splitlines()) == len(plain.stdout.splitlines()) > 0
    assert twice.stdout == plain.stdout
