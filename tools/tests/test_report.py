"""`fusion-node report` in a real browser: headless Chromium renders the self-contained HTML (nothing
fetched), the screenshot is not blank, and the expected series are there.
"""
import re, shutil, subprocess
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin

from test_bag_interop import make_messages, node, write_rosbags  # noqa: F401  (fixture)

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason='chromium is not installed (tools/setup.sh installs it)')


def test_the_report_renders_in_chromium_with_every_series(node, tmp_path):
    bag = tmp_path / 'run'
    write_rosbags(bag, make_messages(n=1500, seed=21), StoragePlugin.MCAP, zstd_chunks=True)
    html = tmp_path / 'report.html'
    r = subprocess.run([str(node), 'report', str(bag), '-o', str(html)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = html.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', text)               # nothing is fetched
    for series in ['id="heading"', 'id="accuracy-band"', 'id="flag-at"', 'id="field-strength"', 'id="field-dip"',
                   'id="raw-x-y"', 'id="calibrated-y-z"']:
        assert series in text, series
    assert '<!--SKIPPED-->' not in text and 'skipped samples' in text
    shot = tmp_path / 'shot.png'
    c = subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--window-size=1100,1600',
                        '--enable-logging=stderr', '--v=0', f'--screenshot={shot}', html.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert shot.exists(), c.stderr
    assert 'CONSOLE' not in c.stderr and 'Uncaught' not in c.stderr, c.stderr
    import matplotlib.image as mpimg
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.std() > 0.05                                    # not blank
    assert (np.abs(pixels - pixels[0, 0]).sum(axis=-1) > 0.3).mean() > 0.02   # a fair share is drawn
