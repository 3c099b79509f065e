"""The Debian package on a clean machine: tools/package.sh builds gyrocompass_VERSION_ARCH.deb, lintian accepts
it (each remaining tag overridden with a reason), and in a minimal Debian 12 root made by mmdebstrap from
Debian's packages alone (no Swift toolchain, no build dependencies) apt installs it and the installed
fusion-node works: --version, replay (the same CSV as the build tree's binary), bag info, stages, watch
against a running publisher, man fusion-node, and systemd-analyze verify accepts the unit.

The root is cached as a tarball in ~/.cache/gyrocompass (GYROCOMPASS_CACHE overrides); delete it to refresh.
"""
import os, re, shutil, subprocess, time
from pathlib import Path

import pytest

from test_bag_interop import node  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
# The release build with the Swift runtime linked in (package.sh and the wheel share it) takes minutes
# on a clean clone: longer than the suite's 5-minute limit for one test, which the first test here pays.
pytestmark = pytest.mark.timeout(1800)
CACHE = Path(os.environ.get('GYROCOMPASS_CACHE', Path.home() / '.cache' / 'gyrocompass'))
# The packages beyond apt itself are what the checks use: man-db for `man`, systemd for systemd-analyze.
ROOT_TARBALL = CACHE / 'debian12-apt-man-systemd.tar'


@pytest.fixture(scope='module')
def debs(tmp_path_factory):
    """{package name: path} of the three packages tools/package.sh builds."""
    out = tmp_path_factory.mktemp('deb')
    r = subprocess.run(['bash', str(ROOT / 'tools' / 'package.sh'), str(out)], capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    paths = [Path(line) for line in r.stdout.strip().splitlines()]
    assert all(p.exists() and p.parent == out for p in paths), r.stdout
    assert paths[-1].name.startswith('gyrocompass_'), r.stdout
    return {p.name.split('_')[0]: p for p in paths}


@pytest.fixture(scope='module')
def deb(debs):
    return debs['gyrocompass']


def test_the_library_packages_build_the_c_example(debs, tmp_path):
    """libgyrocompass0 and libgyrocompass-dev unpacked side by side: pkg-config finds the library, the C
    example builds against the packaged header and runs against the packaged library."""
    assert set(debs) == {'gyrocompass', 'libgyrocompass0', 'libgyrocompass-dev'}
    root = tmp_path / 'root'
    for name in ('libgyrocompass0', 'libgyrocompass-dev'):
        subprocess.run(['dpkg-deb', '-x', str(debs[name]), str(root)], check=True)
    control = subprocess.run(['dpkg-deb', '-f', str(debs['libgyrocompass-dev'])], capture_output=True, text=True,
                             check=True).stdout
    assert 'Depends: libgyrocompass0 (= ' in control
    multiarch = subprocess.run(['gcc', '-print-multiarch'], capture_output=True, text=True).stdout.strip()
    libdir = root / 'usr' / 'lib' / multiarch
    soname = subprocess.run(['readelf', '-d', str(libdir / 'libgyrocompass.so.0')], capture_output=True, text=True,
                            check=True).stdout
    assert 'Library soname: [libgyrocompass.so.0]' in soname and 'swift' not in soname.lower()
    assert 'RUNPATH' not in soname and 'RPATH' not in soname
    env = dict(os.environ, PKG_CONFIG_PATH=str(libdir / 'pkgconfig'), PKG_CONFIG_SYSROOT_DIR=str(root))
    flags = subprocess.run(['pkg-config', '--cflags', '--libs', 'gyrocompass'], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    example = tmp_path / 'example'
    subprocess.run(['cc', str(ROOT / 'tools' / 'examples' / 'heading_from_samples.c'), *flags, '-o', str(example)],
                   check=True)
    lines = ''.join(f'i,{k / 100:.2f},0,0,0.2,0,0,9.81\n' + (f'm,{k / 100:.2f},20,0,-40\n' if k % 2 else '')
                    for k in range(1, 400))
    r = subprocess.run([str(example)], input=lines, capture_output=True, text=True,
                       env=dict(os.environ, LD_LIBRARY_PATH=str(libdir)), timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 399


def version_of(binary):
    r = subprocess.run([str(binary), '--version'], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()[0].split()[1]


def test_package_name_control_and_contents(deb, node):
    version = version_of(node)
    arch = subprocess.run(['dpkg', '--print-architecture'], capture_output=True, text=True).stdout.strip()
    assert deb.name == f'gyrocompass_{version}_{arch}.deb'
    # The version is CHANGELOG.md's first numbered heading.
    assert f'## [{version}] - ' in (ROOT / 'CHANGELOG.md').read_text()
    control = subprocess.run(['dpkg-deb', '-f', str(deb)], capture_output=True, text=True, check=True).stdout
    depends = next(line for line in control.splitlines() if line.startswith('Depends:'))
    # Found from the binary: every C library it links, and no Swift runtime package.
    for package in ['libzmq5', 'libyaml-0-2', 'libsqlite3-0', 'libzstd1', 'liblz4-1', 'libddsc0debian',
                    'libncursesw6', 'libsodium23', 'libc6']:
        assert package in depends, depends
    assert 'swift' not in depends.lower()
    listing = subprocess.run(['dpkg-deb', '-c', str(deb)], capture_output=True, text=True, check=True).stdout
    for path in ['./usr/bin/fusion-node', './usr/share/man/man1/fusion-node.1.gz',
                 './usr/share/bash-completion/completions/fusion-node', './usr/share/zsh/vendor-completions/_fusion-node',
                 './etc/gyrocompass/robot.yaml', './lib/systemd/system/gyrocompass@.service',
                 './usr/share/gyrocompass/pipelines/robot.yaml', './usr/share/doc/gyrocompass/copyright',
                 './usr/share/gyrocompass/gyrocompass_msgs/msg/Heading.msg']:
        assert path in listing, path
    conffiles = subprocess.run(['dpkg-deb', '--ctrl-tarfile', str(deb)], capture_output=True, check=True).stdout
    assert b'conffiles' in conffiles
    # Every picture the packaged README and docs show is in the package beside them.
    import posixpath
    doc = './usr/share/doc/gyrocompass/'
    pages = [('README.md', ROOT / 'README.md')] + [(f'docs/{p.name}', p) for p in sorted((ROOT / 'docs').glob('*.md'))]
    shown = 0
    for name, page in pages:
        for target in re.findall(r'!\[[^\]]*\]\(([^)\s]+)\)', page.read_text()):
            if target.startswith('http'):
                continue
            packaged = posixpath.normpath(posixpath.join(doc + posixpath.dirname(name), target))
            assert './' + packaged.lstrip('./') in listing or packaged in listing, (name, target)
            shown += 1
    assert shown >= 3


def test_lintian_is_clean(deb):
    if not shutil.which('lintian'):
        pytest.skip('lintian is not installed (tools/setup.sh system installs it)')
    r = subprocess.run(['lintian', '--info', str(deb)], capture_output=True, text=True, timeout=600)
    tags = [line for line in r.stdout.splitlines() if line[:2] in ('E:', 'W:', 'I:')]
    assert not tags, '\n'.join(tags)


def unpacked_debian_root(tarball, include, directory, timeout=1800):
    """A minimal Debian 12 root (mmdebstrap's apt variant with the packages `include` names) unpacked in
    `directory`; made once and kept as `tarball` in the cache. Skips the test where it cannot be made."""
    if os.geteuid() != 0:
        pytest.skip('a Debian root needs root (mmdebstrap, chroot); run as root')
    if not shutil.which('mmdebstrap'):
        pytest.skip('mmdebstrap is not installed (tools/setup.sh system installs it)')
    if not tarball.exists():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix('.partial.tar')
        r = subprocess.run(['mmdebstrap', '--quiet', '--variant=apt', f'--include={include}', 'bookworm',
                            str(partial)], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            pytest.skip(f'mmdebstrap could not create a Debian 12 root: {r.stderr.strip()[-800:]}')
        partial.rename(tarball)
    subprocess.run(['tar', '-xf', str(tarball), '-C', str(directory)], check=True)
    return directory


@pytest.fixture(scope='module')
def debian_root(tmp_path_factory):
    """A minimal Debian 12 root, chroot-ready, with /proc, /sys and /dev bound in."""
    root = unpacked_debian_root(ROOT_TARBALL, 'man-db,systemd', tmp_path_factory.mktemp('debian-root'), timeout=900)
    shutil.copy('/etc/resolv.conf', root / 'etc' / 'resolv.conf')
    mounted = []
    try:
        for what in ['proc', 'sys', 'dev']:
            subprocess.run(['mount', '--rbind', f'/{what}', str(root / what)], check=True)
            mounted.append(root / what)
        yield root
    finally:
        for path in reversed(mounted):
            subprocess.run(['umount', '-R', '-l', str(path)])


def chroot(root, command, timeout=300, **kw):
    env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'HOME': '/root', 'LANG': 'C.UTF-8',
           'DEBIAN_FRONTEND': 'noninteractive'}
    return subprocess.run(['chroot', str(root), 'sh', '-c', command], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


@pytest.fixture(scope='module')
def installed(debian_root, deb):
    shutil.copy(deb, debian_root / 'tmp' / deb.name)
    assert not (debian_root / 'usr' / 'bin' / 'swift').exists()
    r = chroot(debian_root, 'apt-get update -qq', timeout=600)
    assert r.returncode == 0, r.stderr
    start = time.monotonic()
    r = chroot(debian_root, f'apt-get install -y --no-install-recommends /tmp/{deb.name}', timeout=600)
    seconds = time.monotonic() - start
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    pulled = re.findall(r'^Unpacking ([^ :]+)', r.stdout, re.MULTILINE)
    print(f'\napt-get install of {deb.name} ({deb.stat().st_size / 1e6:.1f} MB): {seconds:.1f} s, '
          f'{len(pulled)} packages set up: {" ".join(pulled)}')
    assert 'gyrocompass' in pulled and 'libzmq5' in pulled, r.stdout[-3000:]
    return debian_root


def test_installed_binary_reports_its_version(installed, node):
    r = chroot(installed, 'fusion-node --version')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f'fusion-node {version_of(node)}'
    head = subprocess.run(['git', 'rev-parse', '--short=12', 'HEAD'], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:  # the commit built, not the one of an earlier build
        assert lines[1] == f'commit {head.stdout.strip()}', lines
    names = {line.split()[0] for line in lines[1:]}
    assert {'commit', 'libzmq', 'cyclonedds', 'zstd', 'lz4', 'sqlite3', 'libyaml'} <= names, lines
    # Nothing of the Swift toolchain is present: the runtime is inside the binary.
    r = chroot(installed, 'ldd /usr/bin/fusion-node')
    assert r.returncode == 0 and 'not found' not in r.stdout and 'swift' not in r.stdout.lower(), r.stdout


def test_installed_replay_matches_the_build_tree(installed, node, tmp_path):
    bag = tmp_path / 'sim.mcap'
    env = {**os.environ, 'OUT': str(bag), 'TRUTH': str(tmp_path / 'truth.csv')}
    r = subprocess.run([str(node), '--config', str(ROOT / 'Pipelines' / 'simulate-bag.yaml')], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(node), 'replay', str(bag), '--csv', str(tmp_path / 'tree.csv'), '--quiet'],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    shutil.copy(bag, installed / 'tmp' / 'sim.mcap')
    r = chroot(installed, 'cd /tmp && fusion-node replay sim.mcap --csv installed.csv --quiet')
    assert r.returncode == 0, r.stderr
    tree = (tmp_path / 'tree.csv').read_bytes()
    assert len(tree.splitlines()) == 12001
    assert (installed / 'tmp' / 'installed.csv').read_bytes() == tree
    r = chroot(installed, 'fusion-node bag info /tmp/sim.mcap')
    assert r.returncode == 0 and 'imu/data_raw' in r.stdout and '12000' in r.stdout.replace(',', ''), r.stdout


def test_installed_stages_pipelines_and_manual(installed):
    r = chroot(installed, 'fusion-node stages')
    assert r.returncode == 0 and '`type: fusion`' in r.stdout, r.stderr
    r = chroot(installed, 'fusion-node --config /etc/gyrocompass/robot.yaml --check')
    assert r.returncode == 0, r.stderr
    for name in ['simulate-bag.yaml', 'ros2-imu-filter.yaml', 'live-lines.yaml']:
        r = chroot(installed, f'fusion-node --config /usr/share/gyrocompass/pipelines/{name} --check')
        assert r.returncode == 0, (name, r.stderr)
    r = chroot(installed, 'MANPAGER=cat COLUMNS=100 man fusion-node')
    assert r.returncode == 0, r.stderr
    assert 'FUSION-NODE(1)' in r.stdout and 'EXIT STATUS' in r.stdout and '--wait-for-subscribers' in r.stdout


def test_installed_watch_reads_a_running_publisher(installed):
    publisher = subprocess.Popen(
        ['chroot', str(installed), 'fusion-node', 'replay', '/tmp/sim.mcap', '--publish', 'tcp://127.0.0.1:5673',
         '--rate', '1', '--quiet'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        r = chroot(installed, 'timeout 4 fusion-node watch --plain tcp://127.0.0.1:5673', timeout=30)
        headings = [line for line in r.stdout.splitlines() if line.startswith('heading ')]
        assert len(headings) >= 3, r.stdout + r.stderr
    finally:
        publisher.terminate()
        publisher.wait(timeout=30)


def test_unit_verifies_and_runs_as_a_service_would(installed):
    r = chroot(installed, 'systemd-analyze verify gyrocompass@robot.service')
    assert r.returncode == 0, r.stdout + r.stderr
    unit = (installed / 'lib' / 'systemd' / 'system' / 'gyrocompass@.service').read_text()
    for line in ['ExecStart=/usr/bin/fusion-node --config /etc/gyrocompass/%i.yaml', 'SuccessExitStatus=130',
                 'Restart=on-failure', 'DynamicUser=yes', 'StateDirectory=gyrocompass', 'NoNewPrivileges=yes',
                 'ProtectSystem=strict']:
        assert line in unit, line
    # The conffile is registered as one, so an upgrade keeps a user's edits.
    r = chroot(installed, "dpkg-query -W -f='${Conffiles}' gyrocompass")
    assert '/etc/gyrocompass/robot.yaml' in r.stdout, r.stdout


def test_the_library_installs_on_a_clean_machine(installed, debs):
    """libgyrocompass0 in the Debian root (which has no Swift): apt takes its dependencies, ldconfig
    knows the library, and the loader resolves every library it needs."""
    deb = debs['libgyrocompass0']
    shutil.copy(deb, installed / 'tmp' / deb.name)
    r = chroot(installed, f'apt-get install -y --no-install-recommends /tmp/{deb.name}', timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = chroot(installed, 'ldconfig -p | grep libgyrocompass.so.0')
    assert r.returncode == 0 and 'libgyrocompass.so.0' in r.stdout, r.stdout + r.stderr
    path = r.stdout.split('=>')[-1].strip()
    r = chroot(installed, f'ldd {path}')
    assert r.returncode == 0 and 'not found' not in r.stdout and 'swift' not in r.stdout.lower(), r.stdout
