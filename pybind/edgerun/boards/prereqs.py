"""What the board driver needs on the build machine, and where each piece comes from.

Every check knows the Debian package (or pip package) that provides it, so a missing
piece is ONE line that says what to install:

    edgerun: error: aarch64-linux-gnu-gcc not found (the aarch64 cross compiler); install it: apt-get install gcc-aarch64-linux-gnu

`edgerun doctor` runs all checks; the build and test commands `require()` only what
the board at hand needs.
"""
import importlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

from ..errors import MissingToolError

DEFAULT_SYSROOT = "/usr/aarch64-linux-gnu"
MESON_MIN = (1, 1)


class Check:
    """One requirement: `probe()` returns (ok, detail)."""

    def __init__(self, name, what, fix, probe, optional=False, needed_for=""):
        self.name, self.what, self.fix, self.probe = name, what, fix, probe
        self.optional, self.needed_for = optional, needed_for

    def run(self):
        try:
            ok, detail = self.probe()
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            ok, detail = False, str(e)
        return ok, detail

    def error(self, detail=""):
        why = f": {detail}" if detail and detail != "not found" else " not found"
        return MissingToolError(f"{self.name}{why} ({self.what}); install it: {self.fix}")


def _version_line(argv):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else ""


def _program(name, version_arg="--version"):
    def probe():
        path = shutil.which(name)
        if not path:
            return False, "not found"
        return True, f"{path}: {_version_line([path, version_arg])}"
    return probe


def _python_module(mod, attr="__version__"):
    def probe():
        if importlib.util.find_spec(mod) is None:
            return False, "not found"
        m = importlib.import_module(mod)
        return True, f"{mod} {getattr(m, attr, '?')}"
    return probe


def sysroot():
    """The aarch64 root qemu-user loads the dynamic loader and libc from ($EDGERUN_SYSROOT)."""
    return pathlib.Path(os.environ.get("EDGERUN_SYSROOT") or DEFAULT_SYSROOT)


def _sysroot_probe():
    root = sysroot()
    loader = root / "lib" / "ld-linux-aarch64.so.1"
    libc = root / "lib" / "libc.so.6"
    if not loader.exists() or not libc.exists():
        return False, f"{root}/lib has no ld-linux-aarch64.so.1 / libc.so.6"
    return True, str(root)


def meson_command():
    """How to run meson >= 1.1: through this Python when it has the module (pip's
    meson; Debian 12's /usr/bin/meson is 1.0), else `meson` on PATH."""
    if importlib.util.find_spec("mesonbuild") is not None:
        return [sys.executable, "-m", "mesonbuild.mesonmain"]
    path = shutil.which("meson")
    return [path] if path else None


def _meson_probe():
    cmd = meson_command()
    if not cmd:
        return False, "not found"
    v = _version_line(cmd + ["--version"])
    try:
        parts = tuple(int(x) for x in v.split(".")[:2])
    except ValueError:
        return False, f"unreadable version '{v}'"
    if parts < MESON_MIN:
        return False, f"meson {v} is older than {'.'.join(map(str, MESON_MIN))}"
    return True, f"meson {v} ({' '.join(cmd[-3:]) if len(cmd) > 1 else cmd[0]})"


def ninja_command():
    path = shutil.which("ninja")
    if path:
        return path
    try:
        import ninja   # pip's ninja package ships the binary
        p = pathlib.Path(ninja.BIN_DIR) / "ninja"
        return str(p) if p.exists() else None
    except ImportError:
        return None


def _ninja_probe():
    n = ninja_command()
    if not n:
        return False, "not found"
    return True, f"{n} {_version_line([n, '--version'])}"


def _cross_libasan_probe():
    root = sysroot()
    found = sorted(root.glob("lib/libasan.so*"))
    return (True, str(found[0])) if found else (False, f"no libasan in {root}/lib")


CHECKS = {
    "python": Check("python", "Python 3.9+", "apt-get install python3",
                    lambda: (sys.version_info >= (3, 9), sys.version.split()[0])),
    "pyyaml": Check("pyyaml", "reads boards/*.yaml", "pip install pyyaml (or apt-get install python3-yaml)",
                    _python_module("yaml")),
    "cffi": Check("cffi", "Python bindings", "pip install cffi", _python_module("cffi")),
    "numpy": Check("numpy", "Python bindings", "pip install numpy", _python_module("numpy")),
    "meson": Check("meson", "build system, >= 1.1", "pip install 'meson>=1.1'", _meson_probe),
    "ninja": Check("ninja", "build backend", "apt-get install ninja-build (or pip install ninja)", _ninja_probe),
    "gcc": Check("gcc", "the host C compiler", "apt-get install gcc", _program("gcc")),
    "clang": Check("clang", "second compiler (--compiler clang, warning check)", "apt-get install clang",
                   _program("clang"), needed_for="--compiler clang"),
    "aarch64-linux-gnu-gcc": Check("aarch64-linux-gnu-gcc", "the aarch64 cross compiler",
                                   "apt-get install gcc-aarch64-linux-gnu", _program("aarch64-linux-gnu-gcc"),
                                   needed_for="aarch64 boards"),
    "llvm-ar": Check("llvm-ar", "archiver of the clang cross toolchain", "apt-get install llvm",
                     _program("llvm-ar"), needed_for="aarch64 boards with --compiler clang"),
    "sysroot": Check("sysroot", "aarch64 libc for linking and for qemu -L",
                     "apt-get install libc6-dev-arm64-cross", _sysroot_probe, needed_for="aarch64 boards"),
    "qemu-aarch64": Check("qemu-aarch64", "runs aarch64 builds on this machine", "apt-get install qemu-user",
                          _program("qemu-aarch64"), needed_for="edgerun test/bench on aarch64 boards"),
    "aarch64-libasan": Check("aarch64-libasan", "ASan runtime for cross builds with --sanitize address",
                             "apt-get install libasan8-arm64-cross", _cross_libasan_probe, optional=True,
                             needed_for="--sanitize address on aarch64 boards"),
    "llama-cpp-python": Check("llama-cpp-python", "reference for edgerun bench (llama.cpp)",
                              "EDGERUN_SETUP_BENCH=1 bash scripts/setup.sh (pip install llama-cpp-python)",
                              _python_module("llama_cpp"), optional=True, needed_for="make bench"),
    "matplotlib": Check("matplotlib", "latency plots of edgerun bench --board", "pip install matplotlib",
                        _python_module("matplotlib"), optional=True, needed_for="bench PNG plots"),
}


def require(*names):
    """Raises MissingToolError (one line naming the package) for the first missing check."""
    for n in names:
        ok, detail = CHECKS[n].run()
        if not ok:
            raise CHECKS[n].error(detail)


def for_build(board, compiler=None):
    """The checks `edgerun build --board` needs for this board and compiler."""
    names = ["meson", "ninja"]
    compiler = compiler or board.default_compiler()
    if board.is_native:
        names.append(compiler)
    else:
        names += ["sysroot"]
        names += ["clang", "llvm-ar", "aarch64-linux-gnu-gcc"] if compiler == "clang" else ["aarch64-linux-gnu-gcc"]
    return names


def for_run(board):
    """The checks running a build of this board needs."""
    return [] if board.is_native else [board.qemu_binary, "sysroot"]


def diagnose():
    """Every check, run: what `edgerun doctor` prints (and --json gives)."""
    rows = []
    for name, check in CHECKS.items():
        ok, detail = check.run()
        rows.append({"name": name, "ok": ok, "optional": check.optional, "what": check.what,
                     "detail": detail, "fix": None if ok else check.fix, "needed_for": check.needed_for})
    return rows
