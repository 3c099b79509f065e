#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tools/fuzz/corpus/NAME), small valid inputs each harness starts
from: CDR messages as rosbags serializes them, wire frames, a tiny MCAP (zstd and lz4 chunks) and a
tiny sqlite3 bag, and the repository's pipeline files. Run with tools/.venv/bin/python; the output is
committed, so the fuzzers need nothing but the build.
"""
import shutil, struct, sys, tempfile
from pathlib import Path

import lz4.block

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'tools' / 'tests'))
sys.path.insert(0, str(ROOT / 'tools'))
from mcap.writer import CompressionType  # noqa: E402
from rosbags.rosbag2 import StoragePlugin  # noqa: E402
from test_bag_interop import make_messages, write_mcap, write_rosbags, STORE  # noqa: E402
import dds_peer  # noqa: E402

corpus = ROOT / 'tools' / 'fuzz' / 'corpus'
messages = make_messages(n=12, seed=1)

cdr = corpus / 'cdr'
cdr.mkdir(parents=True, exist_ok=True)
store = dds_peer.typestore()
for i, (topic, msgtype, _, msg) in enumerate(messages[:6]):
    (cdr / f'{msgtype.replace("/", "_")}_{i}').write_bytes(bytes(STORE.serialize_cdr(msg, msgtype)))

frames = corpus / 'wireframe'
frames.mkdir(parents=True, exist_ok=True)
imu = bytes(STORE.serialize_cdr(messages[0][3], messages[0][1]))
one = b'imu/data_raw\0sensor_msgs/msg/Imu\0cdr\0' + imu
(frames / 'frame').write_bytes(one)
(frames / 'end_of_stream').write_bytes(b'heading\0gyrocompass/end_of_stream\0none\0')
# Between stages: a numbered batch (first frame's number u64, count u32, the census: its byte count u32,
# then per topic name length u16, name, the topic's number u64 and count u32; then length-prefixed frames).
topic = b'imu/data_raw'
census = struct.pack('<H', len(topic)) + topic + struct.pack('<QI', 17, 2)
numbers = struct.pack('<QI', 41, 2) + struct.pack('<I', len(census)) + census
entries = b''.join(struct.pack('<I', len(one)) + one for _ in range(2))
(frames / 'sequenced').write_bytes(b'\0gyrocompass/batch\0sequenced\0' + numbers + entries)
# The same, compressed (tcp and CURVE endpoints): numbers and census, the entries' size, then one LZ4 block.
(frames / 'sequenced_lz4').write_bytes(b'\0gyrocompass/batch\0sequenced+lz4\0' + numbers + struct.pack('<I', len(entries))
                                       + lz4.block.compress(entries, store_size=False))

mcap = corpus / 'mcap'
mcap.mkdir(parents=True, exist_ok=True)
write_mcap(mcap / 'zstd.mcap', messages[:20], compression=CompressionType.ZSTD, chunk_size=1024)
write_mcap(mcap / 'lz4.mcap', messages[:20], compression=CompressionType.LZ4, chunk_size=1024)

sqlite = corpus / 'sqlite'
sqlite.mkdir(parents=True, exist_ok=True)
with tempfile.TemporaryDirectory() as tmp:
    write_rosbags(Path(tmp) / 'bag', messages[:10], StoragePlugin.SQLITE3)
    db = next((Path(tmp) / 'bag').glob('*.db3'))
    shutil.copy(db, sqlite / 'small.db3')

pipes = corpus / 'pipeline'
pipes.mkdir(parents=True, exist_ok=True)
for f in sorted((ROOT / 'Pipelines').glob('*.yaml')):
    shutil.copy(f, pipes / f.name)
print('seeds written to', corpus)
