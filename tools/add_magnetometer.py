#!/usr/bin/env python3
"""Writes a copy of a bag (a rosbag2 directory with MCAP storage) with a second magnetometer derived from the first, for testing
several magnetometers on real recordings (`extra_magnetometers: [NAME=TOPIC]` of the bag source).

The second magnetometer sees the first one's field plus its own hard iron and white noise. Either
magnetometer can get a magnet for a stretch: a field fixed to the sensor (it turns with the vehicle),
fading in and out over --ramp seconds. The first magnetometer can also get extra noise of its own, so
the two have independent noise on top of what the real sensor recorded.

    tools/.venv/bin/python tools/add_magnetometer.py IN OUT_DIR [--topic /mag2] [--hard-iron 10,-5,3]
        [--noise 0.5] [--primary-noise 0] [--magnet 15,5,0] [--magnet-on primary|second]
        [--magnet-start 60] [--magnet-seconds 60] [--ramp 5] [--seed 1]

Fields in microtesla, times in seconds from the first magnetometer message. The magnet's field is in
the sensor's axes. Prints what it wrote.
"""
import argparse, math, random, sys
from pathlib import Path

from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore


def vector(text):
    try:
        v = [float(x) for x in text.split(',')]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not three numbers x,y,z")
    if len(v) != 3 or not all(math.isfinite(x) for x in v):
        raise argparse.ArgumentTypeError(f"'{text}' is not three finite numbers x,y,z")
    return v


def smoothstep(x):
    x = min(max(x, 0.0), 1.0)
    return x * x * (3 - 2 * x)


def magnet_weight(t, start, seconds, ramp):
    """0..1: how much of the magnet is present t seconds after the first reading."""
    if ramp <= 0:
        return 1.0 if start <= t < start + seconds else 0.0
    return smoothstep((t - start) / ramp) * smoothstep((start + ramp + seconds + ramp - t) / ramp)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('input', type=Path)
    p.add_argument('output', type=Path)
    p.add_argument('--mag-topic', default='/imu/mag', help='the first magnetometer (default /imu/mag)')
    p.add_argument('--topic', default='/mag2', help='the second magnetometer written (default /mag2)')
    p.add_argument('--hard-iron', type=vector, default=[0.0, 0.0, 0.0], help='second one\'s hard iron, uT')
    p.add_argument('--noise', type=float, default=0.5, help='second one\'s white noise per axis, uT (default 0.5)')
    p.add_argument('--primary-noise', type=float, default=0.0, help='white noise added to the first, uT')
    p.add_argument('--magnet', type=vector, default=None, help='a magnet\'s field x,y,z in sensor axes, uT')
    p.add_argument('--magnet-on', choices=['primary', 'second'], default='primary')
    p.add_argument('--magnet-start', type=float, default=60.0)
    p.add_argument('--magnet-seconds', type=float, default=60.0)
    p.add_argument('--ramp', type=float, default=5.0, help='seconds to fade the magnet in and out')
    p.add_argument('--seed', type=int, default=1)
    a = p.parse_args()
    if a.output.exists():
        sys.exit(f'add_magnetometer.py: {a.output} exists; remove it first')
    if a.noise < 0 or a.primary_noise < 0:
        sys.exit('add_magnetometer.py: noise must not be negative')
    rng = random.Random(a.seed)
    store = get_typestore(Stores.ROS2_HUMBLE)
    mag_type = 'sensor_msgs/msg/MagneticField'
    counts = {'copied': 0, 'second': 0, 'magnet': 0}
    with AnyReader([a.input], default_typestore=store) as reader:
        topics = {c.topic: c for c in reader.connections}
        if a.mag_topic not in topics:
            sys.exit(f'add_magnetometer.py: {a.input} has no topic {a.mag_topic} (it has {", ".join(sorted(topics))})')
        if topics[a.mag_topic].msgtype != mag_type:
            sys.exit(f'add_magnetometer.py: {a.mag_topic} carries {topics[a.mag_topic].msgtype}, not {mag_type}')
        if a.topic in topics:
            sys.exit(f'add_magnetometer.py: {a.input} already has a topic {a.topic}')
        with Writer(a.output, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
            out = {}
            for c in reader.connections:
                out[c.id] = writer.add_connection(c.topic, c.msgtype, typestore=store)
            second = writer.add_connection(a.topic, mag_type, typestore=store)
            first_time = None
            for c, timestamp, raw in reader.messages():
                if c.topic != a.mag_topic:
                    writer.write(out[c.id], timestamp, raw)
                    counts['copied'] += 1
                    continue
                m = reader.deserialize(raw, c.msgtype)
                stamp = m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
                first_time = stamp if first_time is None else first_time
                field = [m.magnetic_field.x * 1e6, m.magnetic_field.y * 1e6, m.magnetic_field.z * 1e6]
                w = magnet_weight(stamp - first_time, a.magnet_start, a.magnet_seconds, a.ramp) if a.magnet else 0.0
                if w > 0:
                    counts['magnet'] += 1
                primary = [f + rng.gauss(0, a.primary_noise) if a.primary_noise > 0 else f for f in field]
                derived = [f + h + rng.gauss(0, a.noise) for f, h in zip(field, a.hard_iron)]
                target = primary if a.magnet_on == 'primary' else derived
                if w > 0:
                    for i in range(3):
                        target[i] += a.magnet[i] * w
                m.magnetic_field.x, m.magnetic_field.y, m.magnetic_field.z = (v * 1e-6 for v in primary)
                writer.write(out[c.id], timestamp, store.serialize_cdr(m, c.msgtype))
                m.magnetic_field.x, m.magnetic_field.y, m.magnetic_field.z = (v * 1e-6 for v in derived)
                m.header.frame_id = a.topic.strip('/').replace('/', '_') + '_link'
                writer.write(second, timestamp, store.serialize_cdr(m, c.msgtype))
                counts['second'] += 1
    print(f"{a.output}: {counts['copied']} message(s) copied, {counts['second']} on {a.topic}"
          + (f", the magnet on the {a.magnet_on} in {counts['magnet']} reading(s)" if a.magnet else ''))


if __name__ == '__main__':
    main()
