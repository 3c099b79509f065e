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
    for series in ['id="heading"', 'id="accuracy-band"', 'id="flag-at_rest"', 'id="flag-magnetometer_uncalibrated"', 'id="field-strength"', 'id="field-dip"',
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


def path_points(svg_path_d):
    """(command, x, y) of an SVG path made of M and L commands."""
    return [(m.group(1), float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r'([ML])(-?[\d.]+),(-?[\d.]+)', svg_path_d)]


def element(html, element_id):
    m = re.search(rf'<[a-z]+ id="{re.escape(element_id)}"[^>]*?d="([^"]*)"', html)
    assert m, element_id
    return m.group(1)


@pytest.fixture(scope='module')
def simulated_with_truth(node, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('report-truth')
    truth = tmp / 'truth.csv'
    bag = simulated_bag(node, tmp, duration=60, extra=f'truth_path: {truth}\nhard_iron_ut: [12, -20, 6]')
    return bag, truth


def test_the_report_page_is_one_to_send(node, simulated_with_truth, tmp_path):
    """Legends name every series, headings never draw a full-height stroke at 0/360, the field scatter has
    equal scales (the fitted sphere's outline is round), and the page says what produced it."""
    bag, truth = simulated_with_truth
    html_path = tmp_path / 'r.html'
    r = subprocess.run([str(node), 'report', str(bag), '-o', str(html_path), '--truth', str(truth)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    html = html_path.read_text()
    version = subprocess.run([str(node), '--version'], capture_output=True, text=True).stdout.split()[1]
    assert f'fusion-node {version} (commit ' in html and 'id="pipeline"' in html and 'type: fusion' in html
    for series in ['true-heading', 'heading-error', 'inclination-error', 'field-strength-expected',
                   'field-dip-expected', 'fit-x-y', 'fit-calibrated-y-z', 'bias-0', 'calibration-values', 'fits']:
        assert f'id="{series}"' in html, series
    for label in ['>estimate<', '>truth<', '>95 % accuracy<', '>heading error (estimate - truth)<', '>raw<',
                  '>calibrated<', '>fit<', '>x<', '>y<', '>z<', '>expected (fusion&#39;s reference)<'
                  if '&#39;' in html else ">expected (fusion's reference)<"]:
        assert label in html, label
    assert 'heading error percentiles' in html and 'mean signed heading error' in html
    # The heading plot is 260 px tall with a 34 + 26 px margin: no drawn segment spans most of it.
    for series in ['heading', 'true-heading']:
        points = path_points(element(html, series))
        assert len(points) > 100, series
        spans = [abs(b[2] - a[2]) for a, b in zip(points, points[1:]) if b[0] == 'L']
        assert max(spans) < 150, (series, max(spans))
    # Equal axes: the calibrated fit is a sphere of the fitted strength, so its outline is a circle.
    outline = path_points(element(html, 'fit-calibrated-x-y'))
    xs, ys = [p[1] for p in outline], [p[2] for p in outline]
    width, height = max(xs) - min(xs), max(ys) - min(ys)
    assert width > 50 and abs(width / height - 1) < 0.02, (width, height)
    # Ticks are round numbers.
    for tick in re.findall(r'text-anchor="middle">([^<]+)</text>', html):
        assert float(tick) == int(float(tick)) or len(tick) <= 4, tick


def test_a_failed_replay_marks_its_report_incomplete(node, simulated_with_truth, tmp_path):
    bag, _ = simulated_with_truth
    truncated = tmp_path / 'cut.mcap'
    truncated.write_bytes(bag.read_bytes()[: bag.stat().st_size * 2 // 3])
    html = tmp_path / 'cut.html'
    r = subprocess.run([str(node), 'report', str(truncated), '-o', str(html)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr
    assert 'marked incomplete' in r.stderr
    text = html.read_text()
    body = text[text.index('<body>') + len('<body>'):].lstrip()
    assert body.startswith('<p class="incomplete" id="status">INCOMPLETE: the replay failed'), body[:300]
    assert '<title>INCOMPLETE: ' in text
    # --salvage is accepted by report as by replay: the page is complete, the damage said on it, exit 0.
    r = subprocess.run([str(node), 'report', str(truncated), '-o', str(html), '--salvage', '--overwrite'],
                       capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'INCOMPLETE' not in html.read_text() and 'Read past damage (--salvage)' in html.read_text()


def test_a_truth_from_another_recording_is_warned_about(node, simulated_with_truth, tmp_path):
    bag, _ = simulated_with_truth
    other_truth = tmp_path / 'walking.csv'
    config = tmp_path / 'walk.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, scenario: walking, duration_s: 60, realtime: false, truth_path: '{other_truth}'}}
  out: {{type: csv, inputs: [sim], path: '{tmp_path / 'ignored.csv'}'}}
""")
    r = subprocess.run([str(node), '--config', str(config)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    html = tmp_path / 'w.html'
    r = subprocess.run([str(node), 'report', str(bag), '-o', str(html), '--truth', str(other_truth)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert 'is the truth from this recording?' in r.stderr
    assert 'is the truth from this recording?' in html.read_text()


def test_compare_overlays_a_second_run_and_scores_both(node, simulated_with_truth, tmp_path):
    """`report --compare CSV` draws the second run's heading and scores it beside this one: its column
    holds what a report of that filter scores for itself, and the difference between the two runs."""
    bag, truth = simulated_with_truth
    other = tmp_path / 'complementary.csv'
    r = subprocess.run([str(node), 'replay', str(bag), '--filter', 'complementary', '--csv', str(other), '--quiet'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr

    def report(name, *extra):
        page = tmp_path / name
        r = subprocess.run([str(node), 'report', str(bag), '-o', str(page), '--truth', str(truth), *map(str, extra)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return page.read_text()

    def heading_rmse(html):
        return re.search(r'heading (\d+\.\d+), inclination', html).group(1)

    html = report('both.html', '--compare', other, '--compare-label', 'complementary filter')
    itself = report('complementary.html', '--filter', 'complementary')
    assert 'id="compared-heading"' in html and '>complementary filter<' in html
    table = html[html.index('<h2>Compared with complementary filter</h2>'):]
    table = table[:table.index('</table>')]
    row = re.search(r'heading RMSE against the truth, deg</th><td>([\d.]+)</td><td>([\d.]+)</td>', table)
    assert row and row.group(1) == heading_rmse(html) and row.group(2) == heading_rmse(itself), (row, table)
    assert 'heading difference between the two' in table
    r = subprocess.run([str(node), 'report', str(bag), '-o', str(tmp_path / 'x.html'), '--compare',
                        str(tmp_path / 'missing.csv')], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and 'missing.csv' in r.stderr


MEASURE = """<script>
const plots = [...document.querySelectorAll('rect.plot-area')].map(r => {
  const box = r.getBoundingClientRect();
  return {range: r.dataset.xRange, left: box.left, right: box.right,
          title: r.closest('svg').querySelector('text').textContent};
});
const shade = [...document.querySelectorAll('text.shade-label')].map(t => {
  const box = t.getBoundingClientRect();
  return {text: t.textContent, width: box.width, left: box.left};
});
const pre = document.createElement('pre');
pre.id = 'measured';
pre.textContent = JSON.stringify({plots, shade, page: document.documentElement.scrollWidth});
document.body.appendChild(pre);
</script>"""


def measured_in_chromium(html, width, tmp_path):
    """The page laid out by headless Chromium `width` px wide: each plot area's left and right edge (CSS px)
    and x range, the uncalibrated labels, the page's scroll width."""
    import json
    probe = tmp_path / f'probe-{width}.html'
    probe.write_text(html.read_text().replace('</body>', MEASURE + '</body>'))
    c = subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', f'--window-size={width},2000',
                        '--dump-dom', probe.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="measured">(.*?)</pre>', c.stdout, re.S)
    assert found, c.stderr[-2000:]
    return json.loads(found.group(1).replace('&quot;', '"').replace('&amp;', '&'))


def test_the_report_shares_one_time_axis_and_shows_the_uncalibrated_start(node, tmp_path):
    """The simulator's sensor with hard iron and its truth: the report scores the calibrated part apart
    from the uncalibrated start, shades and labels that start on every time plot, and in Chromium at
    1400 and 800 px every time plot's axis spans the same pixels (within 2 px) and nothing is wider than
    the window."""
    truth_csv = tmp_path / 'truth.csv'
    bag = simulated_bag(node, tmp_path, duration=60,
                        extra=f'hard_iron_ut: [25, -30, 12]\ntruth_path: {truth_csv}')
    html = tmp_path / 'report.html'
    r = subprocess.run([str(node), 'report', str(bag), '-o', str(html), '--truth', str(truth_csv)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = html.read_text()
    found = re.search(r'<b>([\d.]+) deg</b> calibrated \(\d+ samples\) / ([\d.]+) deg while uncalibrated', text)
    assert found, 'the calibrated and uncalibrated parts are not scored apart'
    calibrated, uncalibrated = map(float, found.groups())
    assert calibrated < 5 < uncalibrated
    assert 'heading-error-clipped' in text                # the uncalibrated errors leave the scaled axis
    for series in ['uncalibrated-heading"', 'uncalibrated-heading-error"', 'uncalibrated-field-strength"']:
        assert 'id="' + series in text, series
    assert re.search(r'>90</text>.*>180</text>.*>270</text>.*>360</text>', text, re.S)   # heading ticks
    for width in (1400, 800):
        m = measured_in_chromium(html, width, tmp_path)
        time_plots = [p for p in m['plots'] if p['range'].split()[0] in ('0', '0.0')]
        assert len(time_plots) >= 7, m['plots']
        lefts = [p['left'] for p in time_plots]
        rights = [p['right'] for p in time_plots]
        assert max(lefts) - min(lefts) <= 2 and max(rights) - min(rights) <= 2, (width, time_plots)
        assert {p['range'] for p in time_plots} == {time_plots[0]['range']}
        assert m['page'] <= width
        labels = [s for s in m['shade'] if s['text'] == 'uncalibrated']
        assert len(labels) >= 5 and all(s['width'] > 20 for s in labels), m['shade']
