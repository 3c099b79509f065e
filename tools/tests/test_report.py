"""`fusion-node report` in a real browser: headless Chromium renders the self-contained HTML (nothing
fetched), the screenshot is not blank, and the expected series are there.
"""
import re, shutil, subprocess
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin

from test_bag_interop import make_messages, node, write_rosbags  # noqa: F401  (fixture)
from test_default_graph import simulated_bag

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


def test_the_report_scores_against_truth_exactly_as_the_shared_scorer(node, tmp_path):
    """A simulated run with its ground truth (the simulator's truth_path), scored by the report and by the
    BROAD scorer in ../shared/bench on the same files."""
    import gzip, importlib.util, re
    scorer_path = Path(__file__).resolve().parents[3] / 'shared' / 'bench' / 'broad_score.py'
    if not scorer_path.exists():
        pytest.skip('the shared BROAD scorer is not beside the checkout')
    spec = importlib.util.spec_from_file_location('broad_score', scorer_path)
    scorer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scorer)
    truth_csv = tmp_path / 'truth.csv'
    bag = simulated_bag(node, tmp_path, duration=40, extra=f'truth_path: {truth_csv}')
    truth_gz = tmp_path / 'truth.csv.gz'
    truth_gz.write_bytes(gzip.compress(truth_csv.read_bytes()))
    html, estimate = tmp_path / 'r.html', tmp_path / 'e.csv'
    r = subprocess.run([str(node), 'report', str(bag), '-o', str(html), '--truth', str(truth_gz)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(node), 'replay', str(bag), '--csv', str(estimate), '--quiet']).returncode == 0
    t, q_ref, movement = scorer.read_truth(truth_gz)
    expected = scorer.errors(scorer.read_estimate(estimate, t), q_ref, movement)
    m = re.search(r'total ([\d.]+), heading ([\d.]+), inclination ([\d.]+) deg', html.read_text())
    assert m, 'no RMSE row'
    got = dict(zip(('total', 'heading', 'inclination'), map(float, m.groups())))
    for k in got:
        assert abs(got[k] - expected[k]) < 0.01, (k, got[k], expected[k])
    assert 'id="true-heading"' in html.read_text() and 'id="heading-error"' in html.read_text()
