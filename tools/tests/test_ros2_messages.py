"""We read what ROS 2 writes: every message type of ROS 2's test_msgs package (the definitions of
test_interface_files, from PyPI's ros-test-interface-files) written by rosbags with values that are
not the defaults, read back by `fusion-node bag echo` to the same values rosbags decodes, and copied
through this project's reader and writer (`fusion-node bag convert`) into bags rosbags reads to the
same values. Bags are written two ways: by rosbags' writer (its generated definitions) and by the mcap
library with the raw .msg files as a ROS 2 recorder embeds them (empty types have no field there, but
their CDR still holds rosidl's one placeholder byte).
"""
import dataclasses, json, math, subprocess, sys
from pathlib import Path

import numpy as np
import pytest
from mcap.writer import Writer as McapWriter
from rosbags.highlevel import AnyReader
from rosbags.interfaces import Nodetype
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore, get_types_from_msg

from test_bag_interop import node  # noqa: F401  (fixture)

MSG_DIR = Path(sys.prefix) / 'share' / 'test_interface_files' / 'msg'
# WStrings is left out: rosbags' .msg parser reads `wstring` as the name of a message type, so there is no
# reference to compare with (our decoder reads it as rosbags' serializer writes it, like a string).
TYPES = ['BasicTypes', 'Arrays', 'BoundedSequences', 'UnboundedSequences', 'Nested', 'MultiNested', 'Strings',
         'Constants', 'Defaults', 'Empty']
PLACEHOLDER = 'structure_needs_at_least_one_member'
NUMPY = {'bool': np.bool_, 'byte': np.uint8, 'char': np.uint8, 'int8': np.int8, 'uint8': np.uint8,
         'int16': np.int16, 'uint16': np.uint16, 'int32': np.int32, 'uint32': np.uint32, 'int64': np.int64,
         'uint64': np.uint64, 'float32': np.float32, 'float64': np.float64}


@pytest.fixture(scope='module')
def store():
    s = get_typestore(Stores.ROS2_HUMBLE)
    types = {}
    for f in sorted(MSG_DIR.glob('*.msg')):
        if f.stem == 'WStrings':
            continue
        types.update(get_types_from_msg(f.read_text(), f'test_msgs/msg/{f.stem}'))
    s.register(types)
    FIELDS.update({name: [f for f, _ in fields] for name, (_, fields) in s.fielddefs.items()})
    return s


def primitive(kind, k):
    """A value of a primitive kind that is not its default (k varies it)."""
    if kind == 'bool':
        return k % 2 == 0
    if kind in ('string', 'wstring'):
        return f'value {k} ä'
    if kind.startswith('float'):
        return [1.5, -2.25, 1e-3, 1e10][k % 4] * (1 + k)
    if kind == 'byte':               # rosbags packs byte as a signed char; ROS 2 reads an octet: 0..127 agree
        return [127, 0, 1 + k, 7][k % 4]
    info = np.iinfo(NUMPY[kind])
    return int([info.max, info.min, 1 + k, 7][k % 4])


def value(store, desc, k):
    node_type, detail = desc
    if node_type == Nodetype.BASE:
        return primitive(detail[0], k)
    if node_type == Nodetype.NAME:
        return build(store, detail, k)
    element, size = detail
    count = size if node_type == Nodetype.ARRAY else (min(size, 2) if size else 3)
    items = [value(store, element, k + i) for i in range(count)]
    if element[0] == Nodetype.BASE and element[1][0] in NUMPY:
        return np.array(items, dtype=NUMPY[element[1][0]])
    return items


def build(store, name, k=0):
    _, fields = store.fielddefs[name]
    return store.types[name](**{f: value(store, d, k + i) for i, (f, d) in enumerate(fields)})


FIELDS = {}   # message type -> its field names (rosbags' dataclasses also carry the constants)


def plain(x):
    """A deserialized rosbags message as JSON-like values, without rosidl's placeholder field."""
    if isinstance(x, np.ndarray):
        return [plain(v) for v in x.tolist()]
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if hasattr(x, '__dataclass_fields__'):
        return {f: plain(getattr(x, f)) for f in FIELDS[x.__msgtype__] if f != PLACEHOLDER}
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def drop_placeholder(x):
    if isinstance(x, dict):
        return {k: drop_placeholder(v) for k, v in x.items() if k != PLACEHOLDER}
    if isinstance(x, list):
        return [drop_placeholder(v) for v in x]
    return x


def close(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-6)
    return a == b and type(a) is type(b)


def raw_definition(name):
    """The definition as a ROS 2 recorder embeds it: the .msg files as written, dependencies after."""
    text, seen, queue = [], set(), [name]
    while queue:
        t = queue.pop(0)
        if t in seen:
            continue
        seen.add(t)
        body = (MSG_DIR / f'{t}.msg').read_text()
        text.append(body if t == name else '=' * 80 + f'\nMSG: test_msgs/{t}\n' + body)
        for line in body.splitlines():
            word = line.split('#')[0].split()
            if word and word[0].split('[')[0] in TYPES:
                queue.append(word[0].split('[')[0])
    return '\n'.join(text)


def write_bags(store, folder):
    messages = {t: [build(store, f'test_msgs/msg/{t}', k) for k in range(3)] for t in TYPES}
    by_rosbags = folder / 'rosbags'
    with Writer(by_rosbags, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        for t in TYPES:
            conn = w.add_connection(f'/{t.lower()}', f'test_msgs/msg/{t}', typestore=store)
            for k, m in enumerate(messages[t]):
                w.write(conn, 10**9 * (k + 1), store.serialize_cdr(m, f'test_msgs/msg/{t}'))
    by_recorder = folder / 'recorder.mcap'
    with open(by_recorder, 'wb') as f:
        w = McapWriter(f)
        w.start(profile='ros2', library='rosbag2-like')
        for t in TYPES:
            schema = w.register_schema(f'test_msgs/msg/{t}', 'ros2msg', raw_definition(t).encode())
            channel = w.register_channel(f'/{t.lower()}', 'cdr', schema)
            for k, m in enumerate(messages[t]):
                w.add_message(channel, log_time=10**9 * (k + 1), publish_time=10**9 * (k + 1), sequence=k,
                              data=store.serialize_cdr(m, f'test_msgs/msg/{t}'))
        w.finish()
    return messages, [by_rosbags, by_recorder]


def echo(node, bag):
    r = subprocess.run([str(node), 'bag', 'echo', str(bag)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [json.loads(l) for l in r.stdout.splitlines()]


def test_every_test_msgs_type_decodes_to_rosbags_values(node, store, tmp_path):
    messages, bags = write_bags(store, tmp_path)
    for bag in bags:
        echoed = echo(node, bag)
        assert len(echoed) == 3 * len(TYPES)
        by_topic = {}
        for line in echoed:
            by_topic.setdefault(line['topic'], []).append(drop_placeholder(line['message']))
        for t in TYPES:
            got, want = by_topic[f'/{t.lower()}'], [plain(m) for m in messages[t]]
            assert close(got, want), f'{bag.name} {t}: {first_difference(got, want)}'


def test_every_test_msgs_type_round_trips_through_our_reader_and_writer(node, store, tmp_path):
    messages, bags = write_bags(store, tmp_path)
    for bag in bags:
        for suffix in ('.mcap', '.db3'):
            out = tmp_path / f'{bag.stem}-copy{suffix}'
            r = subprocess.run([str(node), 'bag', 'convert', str(bag), str(out)], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            read = {}
            with AnyReader([out], default_typestore=store) as reader:
                for conn, _, raw in reader.messages():
                    read.setdefault(conn.topic, []).append(plain(reader.deserialize(raw, conn.msgtype)))
            for t in TYPES:
                assert close(read[f'/{t.lower()}'], [plain(m) for m in messages[t]]), f'{out.name} {t}'


def first_difference(a, b, path=''):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            if k not in a or k not in b:
                return f'{path}.{k} missing on one side'
            d = first_difference(a[k], b[k], f'{path}.{k}')
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f'{path}: lengths {len(a)} != {len(b)}'
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f'{path}[{i}]')
            if d:
                return d
        return None
    return None if close(a, b) else f'{path}: {a!r} != {b!r}'
