"""Which bags a fleet run replays, what each is called in its output, which robot it belongs to,
and the bytes its key hashes."""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path

BAG_SUFFIXES = ('.mcap', '.db3')


class FleetError(Exception):
    """A fleet run asked for something it cannot do (no bags, an output directory that is a file, ...)."""


def _is_bag_directory(path: Path) -> bool:
    return (path / 'metadata.yaml').is_file()


def _bags_under(directory: Path):
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        if _is_bag_directory(here):
            dirs[:] = []
            yield here
            continue
        dirs.sort()
        for name in sorted(files):
            if name.endswith(BAG_SUFFIXES):
                yield here / name


def find_bags(inputs) -> list[Path]:
    """The bags named by `inputs`: directories (searched for .mcap and .db3 files and rosbag2
    directories), globs, bag files, and text files listing one path per line (relative to the file; '#'
    starts a comment). Raises FleetError naming an input that gives no bag or does not exist."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    found = []
    for given in inputs:
        text = os.fspath(given)
        path = Path(text)
        if any(c in text for c in '*?['):
            matches = [Path(m) for m in sorted(glob.glob(text, recursive=True))]
            bags = [m for m in matches if m.suffix in BAG_SUFFIXES or _is_bag_directory(m)]
            if not bags:
                raise FleetError(f'{text}: the pattern matches no bag')
            found += bags
        elif path.is_dir():
            bags = list(_bags_under(path))
            if not bags:
                raise FleetError(f'{text}: no bag in this directory (.mcap, .db3 or a rosbag2 directory)')
            found += bags
        elif path.is_file() and path.suffix in BAG_SUFFIXES:
            found.append(path)
        elif path.is_file():
            listed = []
            for number, line in enumerate(path.read_text().splitlines(), 1):
                entry = line.split('#', 1)[0].strip()
                if not entry:
                    continue
                bag = (path.parent / entry) if not os.path.isabs(entry) else Path(entry)
                if not bag.exists():
                    raise FleetError(f'{text}:{number}: {entry}: no such bag')
                listed.append(bag)
            if not listed:
                raise FleetError(f'{text}: lists no bag')
            found += listed
        else:
            raise FleetError(f'{text}: no such file or directory')
    unique, seen = [], set()
    for bag in found:
        resolved = bag.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(resolved)
    return unique


def _names(bags: list[Path]) -> list[str]:
    """Each bag's name in the output: its path below the bags' common directory, without the suffix."""
    if len(bags) == 1:
        root = bags[0].parent
    else:
        root = Path(os.path.commonpath([b.parent for b in bags]))
    relative = [bag.relative_to(root).as_posix() for bag in bags]
    stems = [rel[:-len(bag.suffix)] if bag.suffix in BAG_SUFFIXES else rel for rel, bag in zip(relative, bags)]
    # Two bags that differ only in their suffix (run.mcap, run.db3) keep it, so neither overwrites the other.
    taken = {}
    for stem in stems:
        taken[stem] = taken.get(stem, 0) + 1
    return [rel if taken[stem] > 1 else stem for rel, stem in zip(relative, stems)]


def robot_of(name: str, pattern: str | None = None) -> str:
    """The robot a bag belongs to: the regex's group 'robot' (or its first group, or its whole match)
    in the bag's name; without a regex the name's first directory (the bag's own name when it has none)."""
    if pattern:
        m = re.search(pattern, name)
        if not m:
            return ''
        if 'robot' in m.re.groupindex:
            return m.group('robot') or ''
        return m.group(1) if m.re.groups else m.group(0)
    return name.split('/', 1)[0]


def _hash_bag(bag: Path, digest) -> None:
    files = [bag] if bag.is_file() else sorted(p for p in bag.rglob('*') if p.is_file())
    for f in files:
        digest.update(f.relative_to(bag).as_posix().encode() if f != bag else b'')
        with open(f, 'rb') as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
