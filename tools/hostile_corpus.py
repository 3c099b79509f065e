#!/usr/bin/env python3
"""Hostile recordings for `fusion-node replay`: mutated copies of an MCAP file, each replayed under limits.

The file is split into its top-level records (opcode, 64-bit length, content) and mutated the ways damage
and hostile files arrive: bytes flipped anywhere; the file cut at a record boundary or inside a record; a
record repeated; two records swapped; a record's length claimed far larger than the file; garbage after
the end. Every case is replayed with `--csv` (no --salvage) and judged:
- a signal exit (a trap, an abort, an out-of-memory kill) fails;
- a run still going after --timeout seconds (20) fails (a hang);
- peak memory above 4 x the input + 200 MB fails (measured per process by wait4);
- exit 0 with a CSV that differs from the undamaged file's fails (a silent change), except flips that all
  fell in bytes no CRC covers (a writer that left its CRCs 0): those are counted and printed apart, since
  a changed value there leaves nothing to detect. Exit 1 (error) and 3 (damage or loss reported) pass.
Cases are drawn from a seeded generator, so a run can be repeated; --keep DIR saves the failing cases.

Usage: python3 tools/hostile_corpus.py BAG.mcap [--cases 300] [--seed 1] [--node PATH] [--timeout 20]
                                        [--keep DIR]
Prints the counts per mutation and per exit code; exits 1 when any case failed.
"""
import argparse, os, random, shutil, signal, struct, subprocess, sys, tempfile, time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAGIC = b'\x89MCAP0\r\n'
FOOTER = 0x02


def records(data):
    """(offset, opcode, total size) of every top-level record until the footer or the first that does not fit."""
    out, pos = [], len(MAGIC)
    while pos + 9 <= len(data):
        opcode = data[pos]
        (length,) = struct.unpack_from('<Q', data, pos + 1)
        if pos + 9 + length > len(data):
            break
        out.append((pos, opcode, 9 + length))
        pos += 9 + length
        if opcode == FOOTER:
            break
    return out


def unchecked_spans(data, recs):
    """Byte ranges of the data section no checksum covers, when the writer left the data section's CRC 0:
    everything there but the records of chunks that carry a CRC. A flipped bit in such a range can change
    a value without any trace."""
    end = next((off for off, op, _ in recs if op == 0x0F), None)
    if end is None or struct.unpack_from('<I', data, end + 9)[0] != 0:
        return []
    spans, start = [], len(MAGIC)
    for off, op, size in recs:
        if off >= end:
            break
        if op == 0x06 and struct.unpack_from('<I', data, off + 9 + 24)[0] != 0:
            (n,) = struct.unpack_from('<I', data, off + 9 + 28)
            covered = off + 9 + 32 + n + 8
            spans.append((start, covered))
            start = off + size
    spans.append((start, end))
    return [(a, b) for a, b in spans if b > a]


def mutate(data, recs, kind, rng):
    """One damaged copy of `data`, a few words on what was done, and the bytes flipped (flips only)."""
    if kind == 'flip':
        out = bytearray(data)
        n = rng.choice([1, 1, 2, 8, 64])
        where = [rng.randrange(len(out)) for _ in range(n)]
        for i in where:
            out[i] ^= 1 << rng.randrange(8)
        return bytes(out), f'{n} bit(s) flipped', where
    if kind == 'cut_at_record':
        offset, opcode, _ = rng.choice(recs)
        return data[:offset], f'cut before record 0x{opcode:02x} at {offset}', []
    if kind == 'cut_inside':
        offset, opcode, size = rng.choice(recs)
        at = offset + rng.randrange(1, size)
        return data[:at], f'cut inside record 0x{opcode:02x} at {at}', []
    if kind == 'duplicate':
        offset, opcode, size = rng.choice(recs[:-1])
        return data[:offset + size] + data[offset:], f'record 0x{opcode:02x} at {offset} repeated', []
    if kind == 'swap':
        (a, oa, sa), (b, ob, sb) = sorted(rng.sample(recs[:-1], 2))
        out = data[:a] + data[b:b + sb] + data[a + sa:b] + data[a:a + sa] + data[b + sb:]
        return out, f'records 0x{oa:02x} at {a} and 0x{ob:02x} at {b} swapped', []
    if kind == 'huge_length':
        offset, opcode, _ = rng.choice(recs)
        claim = rng.choice([1 << 30, 1 << 40, (1 << 64) - 1, len(data) * 4])
        out = bytearray(data)
        struct.pack_into('<Q', out, offset + 1, claim)
        return bytes(out), f'record 0x{opcode:02x} at {offset} claims {claim} bytes', []
    if kind == 'garbage_tail':
        tail = bytes(rng.randrange(256) for _ in range(rng.choice([1, 9, 100, 5000])))
        return data + tail, f'{len(tail)} bytes of garbage appended', []
    raise ValueError(kind)


KINDS = ['flip', 'cut_at_record', 'cut_inside', 'duplicate', 'swap', 'huge_length', 'garbage_tail']


def replay(node, bag, csv, timeout):
    """(exit code or None when it hung, peak memory in bytes, last stderr line)."""
    for p in (csv, Path(str(csv) + '.partial')):
        p.unlink(missing_ok=True)
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([str(node), 'replay', str(bag), '--csv', str(csv), '--quiet'],
                            stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = 0
            return None, usage.ru_maxrss * 1024, 'hung'
        time.sleep(0.01)
    proc.returncode = 0  # reaped by wait4: keep Popen from waiting again
    err.seek(0)
    lines = err.read().decode(errors='replace').strip().splitlines()
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024, lines[-1] if lines else ''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('bag', type=Path, help='an undamaged MCAP file')
    ap.add_argument('--cases', type=int, default=300)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--node', type=Path, default=ROOT / '.build/release/fusion-node')
    ap.add_argument('--timeout', type=float, default=20)
    ap.add_argument('--keep', type=Path, help='save failing cases here')
    a = ap.parse_args()
    data = a.bag.read_bytes()
    if not data.startswith(MAGIC):
        sys.exit(f'{a.bag}: not an MCAP file')
    recs = records(data)
    if len(recs) < 3:
        sys.exit(f'{a.bag}: only {len(recs)} records')
    work = Path(tempfile.mkdtemp(prefix='hostile-'))
    baseline_csv = work / 'baseline.csv'
    code, _, last = replay(a.node, a.bag, baseline_csv, a.timeout)
    if code != 0:
        sys.exit(f'{a.bag}: the undamaged file replays with exit {code}: {last}')
    baseline = baseline_csv.read_bytes()
    rng = random.Random(a.seed)
    limit = 4 * len(data) + 200 * 1024 * 1024
    kinds, codes, failures, peak = Counter(), Counter(), [], 0
    unchecked = unchecked_spans(data, recs)
    undetectable = 0
    started = time.monotonic()
    for case in range(a.cases):
        kind = KINDS[case % len(KINDS)]
        damaged, what, flipped = mutate(data, recs, kind, rng)
        bag = work / 'case.mcap'
        bag.write_bytes(damaged)
        csv = work / 'case.csv'
        code, memory, last = replay(a.node, bag, csv, a.timeout)
        peak = max(peak, memory)
        kinds[kind] += 1
        codes['hang' if code is None else code] += 1
        problem = None
        if code is None:
            problem = f'no end after {a.timeout:.0f} s'
        elif code < 0:
            problem = f'killed by signal {signal.Signals(-code).name}: {last}'
        elif memory > limit:
            problem = f'peak memory {memory >> 20} MiB > {limit >> 20} MiB'
        elif code == 0 and (not csv.exists() or csv.read_bytes() != baseline):
            if flipped and all(any(a <= i < b for a, b in unchecked) for i in flipped):
                undetectable += 1
            else:
                problem = 'exit 0 but the CSV differs from the undamaged replay (a silent change)'
        if problem:
            failures.append((case, kind, what, problem))
            if a.keep:
                a.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(bag, a.keep / f'case-{a.seed}-{case}-{kind}.mcap')
    shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - started
    print(f'{a.cases} cases from {a.bag.name} ({len(data)} bytes, {len(recs)} records), seed {a.seed}, '
          f'{seconds:.0f} s')
    print('mutations: ' + ', '.join(f'{k} {n}' for k, n in sorted(kinds.items())))
    print('exit codes: ' + ', '.join(f'{k}: {n}' for k, n in sorted(codes.items(), key=str)))
    print(f'peak memory {peak >> 20} MiB (bound {limit >> 20} MiB)')
    if unchecked:
        print(f'{sum(b - a for a, b in unchecked)} of {len(data)} bytes are covered by no CRC (the writer left them '
              f'0); {undetectable} flip case(s) changed the output there without a trace, which no reader can see')
    for case, kind, what, problem in failures:
        print(f'FAIL case {case} ({kind}: {what}): {problem}')
    print(f'{len(failures)} failure(s)')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
