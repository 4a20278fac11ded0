# SPDX-License-Identifier: Apache-2.0
"""`pip install ./python` needs no index: the in-tree PEP 517 backend
(python/_build/ulysses_build.py) builds a wheel with the standard library
alone.  The test calls the backend's hooks as pip does, checks the wheel
(its RECORD hashes, no build-tree _paths.py, the recorded library path),
imports the package from the unpacked wheel and asks it for a shard; then,
where python has venv and pip, installs ./python with pip --no-index into a
fresh virtual environment and imports it there."""

import base64
import hashlib
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from util import Failures, child_env

F = Failures()
src = os.path.join(os.environ["top_srcdir"], "python")
lib = os.path.join(os.environ["top_builddir"], "src", ".libs", "libulysses.so")
W = tempfile.mkdtemp(prefix="uly-wheel-")
atexit.register(shutil.rmtree, W, True)

sys.path.insert(0, os.path.join(src, "_build"))
import ulysses_build  # noqa: E402

F.ok(ulysses_build.get_requires_for_build_wheel() == [], "the backend asks for build requirements")
os.environ["ULYSSES_LIBRARY"] = lib
name = ulysses_build.build_wheel(W)
del os.environ["ULYSSES_LIBRARY"]
whl = os.path.join(W, name)
F.ok(name == "ulysses-0.1.0-py3-none-any.whl", "wheel name %s" % name)
with zipfile.ZipFile(whl) as z:
    names = z.namelist()
    record = z.read("ulysses-0.1.0.dist-info/RECORD").decode().splitlines()
    for line in record:
        arc, digest, size = line.rsplit(",", 2)
        if not digest:
            continue
        data = z.read(arc)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        F.ok(digest == want and int(size) == len(data), "RECORD entry of %s does not match" % arc)
    paths = z.read("ulysses/_paths.py").decode()
    z.extractall(os.path.join(W, "site"))
for mod in ("__init__", "_lib", "_core", "_tensors", "dump", "hooks", "_paths"):
    F.ok("ulysses/%s.py" % mod in names, "wheel lacks ulysses/%s.py" % mod)
F.ok(repr(lib) in paths, "the wheel's _paths.py does not record ULYSSES_LIBRARY: %r" % paths)
F.ok(len(record) == len(names), "RECORD lists %d of %d files" % (len(record), len(names)))

code = "import ulysses; print(ulysses.__file__); print(list(ulysses.shard('zigzag', 2, 1, seq=8).tokens))"
env = child_env()
env.pop("ULYSSES_LIBRARY", None)
env.pop("LSAN_OPTIONS", None)      # python children: no slow-unwinding leak options
env["PYTHONPATH"] = os.path.join(W, "site")
p = subprocess.run([sys.executable, "-c", code], env=dict(env, **{k: os.environ[k] for k in ("LD_PRELOAD", "ASAN_OPTIONS") if k in os.environ}),
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
F.ok(p.returncode == 0 and "[2, 3, 4, 5]" in p.stdout and W in p.stdout,
     "the unpacked wheel does not import or find its recorded library: %s" % p.stdout)
print("backend: wheel %s built with the standard library; imported from it: zigzag rank 1 of 2 holds %s"
      % (name, p.stdout.split("\n")[1] if p.returncode == 0 else "?"))

# pip itself, without an index, where venv and pip exist
have = subprocess.run([sys.executable, "-c", "import venv, pip"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0
if not have:
    print("python has no venv or pip module (Debian: python3-pip): skipped pip install --no-index ./python")
else:
    venv = os.path.join(W, "venv")
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    F.ok(r.returncode == 0, "venv: %s" % r.stdout)
    penv = dict(env, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    penv.pop("PYTHONPATH", None)
    r = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--no-index", src], env=penv,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=180)
    F.ok(r.returncode == 0, "pip install --no-index ./python: exit %d\n%s" % (r.returncode, r.stdout))
    penv["ULYSSES_LIBRARY"] = lib
    for k in ("LD_PRELOAD", "ASAN_OPTIONS"):
        if k in os.environ:
            penv[k] = os.environ[k]
    r = subprocess.run([os.path.join(venv, "bin", "python"), "-c", code], env=penv, cwd=W, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    F.ok(r.returncode == 0 and venv in r.stdout, "the pip-installed package: %s" % r.stdout)
    print("pip install --no-index ./python into a fresh venv: exit %d; imported from %s"
          % (r.returncode, r.stdout.split("\n")[0]))
F.exit()
