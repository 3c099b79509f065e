#!/usr/bin/env python3
"""Every shell command README.md shows, as the README's reader would type it: the lines of each ```sh
block, comments (`# ...` after a command, or a whole line) taken off. The README-commands test runs them
(tools/tests/test_readme_commands.py); by hand:

  tools/readme_commands.py            one line per command: README line number, block number, command
  tools/readme_commands.py --json     the same as JSON, with each block's language and source lines
"""
import json, re, sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / 'README.md'


def blocks(text):
    """Each fenced block: (language, first line number of its content, its lines)."""
    out, language, start, lines = [], None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r'^```(\S*)\s*$', line)
        if fence and language is None:
            language, start, lines = fence.group(1), number + 1, []
        elif fence:
            out.append((language, start, lines))
            language = None
        elif language is not None:
            lines.append(line)
    if language is not None:
        raise ValueError(f'README.md: the block opened at line {start - 1} is never closed')
    return out


def without_comment(line):
    """The command on `line` without a trailing comment: a `#` at the start of a word, outside quotes."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in '\'"':
            quote = c
        elif c == '#' and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(text=None):
    """[(README line, block index, command)] for every ```sh block, in order."""
    text = README.read_text() if text is None else text
    out = []
    for index, (language, start, lines) in enumerate(blocks(text)):
        if language != 'sh':
            continue
        for offset, line in enumerate(lines):
            command = without_comment(line).strip()
            if command:
                out.append((start + offset, index, command))
    return out


def main():
    if '--json' in sys.argv[1:]:
        text = README.read_text()
        print(json.dumps({'commands': commands(text),
                          'blocks': [{'language': l, 'line': s, 'lines': b} for l, s, b in blocks(text)]}, indent=1))
        return
    for line, block, command in commands():
        print(f'{line}\t{block}\t{command}')


if __name__ == '__main__':
    main()
