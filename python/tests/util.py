# SPDX-License-Identifier: Apache-2.0
"""Helpers of the Python tests: running the built ulysses binary and
skipping (exit 77) with a printed reason."""

import os
import subprocess
import sys


def skip(why):
    print("skip: " + why)
    sys.exit(77)


def child_env():
    """The environment of the programs a test starts: what the test runner
    had before it preloaded the ASan runtime into python."""
    env = dict(os.environ)
    for name in ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS"):
        orig = env.pop("ULY_CHILD_" + name, None)
        if orig is None:
            continue
        if orig:
            env[name] = orig
        else:
            env.pop(name, None)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def ulysses_bin():
    return os.environ.get("ULYSSES_BIN", "ulysses")


def run(args, check=True):
    """Run the ulysses binary; returns (status, stdout, stderr)."""
    p = subprocess.run([ulysses_bin()] + list(args), env=child_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    if check and p.returncode != 0:
        sys.stderr.write("ulysses %s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        raise SystemExit(1)
    return p.returncode, p.stdout, p.stderr


class Failures:
    """Counts failed assertions; each prints one line naming what failed."""

    def __init__(self):
        self.n = 0
        self.checks = 0

    def ok(self, cond, what):
        self.checks += 1
        if not cond:
            self.n += 1
            print("FAIL: " + what)
        return cond

    def exit(self):
        print("%d checks, %d failed" % (self.checks, self.n))
        sys.exit(1 if self.n else 0)
