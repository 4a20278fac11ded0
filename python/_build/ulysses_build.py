# SPDX-License-Identifier: Apache-2.0
"""A PEP 517 build backend for the ulysses package, standard library only
(pyproject.toml: requires = [], backend-path = ["_build"]), so that
`pip install ./python` works without an index.  Builds a pure-Python wheel
of ulysses/ (and an sdist); the wheel's ulysses/_paths.py records the
library path in ULYSSES_LIBRARY at build time, if any."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "ulysses"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
TAG = "py3-none-any"
DIST_INFO = "%s-%s.dist-info" % (NAME, VERSION)


def _metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: An exact reference and checker for sequence-parallel attention, over libulysses\n"
            "Requires-Python: >=3.6\nRequires-Dist: numpy\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, readme))


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: ulysses_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG


def _sources():
    """The package's modules (not the build tree's generated _paths.py)."""
    pkg = os.path.join(HERE, NAME)
    return sorted(f for f in os.listdir(pkg) if f.endswith(".py") and f != "_paths.py")


def _paths_module():
    lib = os.environ.get("ULYSSES_LIBRARY")
    return ("# Written by the wheel builder: the library recorded at build time (None: the\n"
            "# linker's search path, ctypes.util.find_library).\nLIBRARY = %r\n" % (lib or None))


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, digest, len(data))


def _write_wheel(path, files):
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(arc, data)
            record.append(_record_line(arc, data))
        arc = DIST_INFO + "/RECORD"
        record.append(arc + ",,")
        z.writestr(arc, "\n".join(record) + "\n")


def _dist_info_files():
    return [(DIST_INFO + "/METADATA", _metadata().encode()),
            (DIST_INFO + "/WHEEL", _wheel_file().encode()),
            (DIST_INFO + "/top_level.txt", (NAME + "\n").encode())]


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    for arc, data in _dist_info_files():
        with open(os.path.join(metadata_directory, arc), "wb") as f:
            f.write(data)
    return DIST_INFO


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for src in _sources():
        with open(os.path.join(HERE, NAME, src), "rb") as f:
            files.append(("%s/%s" % (NAME, src), f.read()))
    files.append(("%s/_paths.py" % NAME, _paths_module().encode()))
    files += _dist_info_files()
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    _write_wheel(os.path.join(wheel_directory, name), files)
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """An editable install: a .pth file putting this directory on sys.path."""
    files = [("%s.pth" % NAME, (HERE + "\n").encode())] + _dist_info_files()
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    _write_wheel(os.path.join(wheel_directory, name), files)
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    members = ["pyproject.toml", "README.md", "_build/ulysses_build.py"] + \
        ["%s/%s" % (NAME, s) for s in _sources()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for m in members:
            t.add(os.path.join(HERE, m), arcname="%s/%s" % (base, m))
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
