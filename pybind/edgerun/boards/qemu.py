"""Running a board's binaries on this machine: under qemu-user for aarch64 boards,
directly for the host board.

qemu-user emulates one process: `qemu-aarch64 -L SYSROOT prog args` loads the aarch64
dynamic loader and libc from SYSROOT (Debian's libc6-arm64-cross, or an assembled
sysroot with Python in it). The CPU model is chosen with the QEMU_CPU environment
variable rather than -cpu, so the same command works through meson's exe_wrapper
(toolchains/*.ini: `qemu-aarch64 -L /usr/aarch64-linux-gnu`) where no -cpu can be
added per run.

    r = qemu.run("rpi5", "cortex-a76", ["build/rpi5/runtime_c/tools/edgerun-cli", "--version"])
    r.returncode, r.stdout
"""
import os
import subprocess

from . import board as boards, prereqs


def command(board, argv, sysroot=None):
    """The argv that runs `argv` for `board` on this machine."""
    board = boards.load(board)
    argv = [str(a) for a in argv]
    if board.is_native:
        return argv
    root = str(sysroot or prereqs.sysroot())
    return [board.qemu_binary, "-L", root] + argv


def environment(board, cpu, env=None, sysroot=None):
    """os.environ + env, with QEMU_CPU (and QEMU_LD_PREFIX) set for emulated boards."""
    board = boards.load(board)
    out = dict(os.environ)
    out.update(env or {})
    if not board.is_native:
        if cpu is None:
            raise ValueError(f"board {board.name} runs under qemu: give one of its CPU models "
                             f"({', '.join(board.qemu_cpus)})")
        out["QEMU_CPU"] = cpu
        out["QEMU_LD_PREFIX"] = str(sysroot or prereqs.sysroot())
        # LeakSanitizer stops the world with ptrace, which qemu-user does not
        # emulate: an --sanitize address build would fail every run at exit.
        # ASan's other checks work under emulation and stay on.
        if "detect_leaks" not in out.get("ASAN_OPTIONS", ""):
            out["ASAN_OPTIONS"] = ":".join(x for x in (out.get("ASAN_OPTIONS"), "detect_leaks=0") if x)
    return out


def run(board, cpu, argv, env=None, timeout=600, sysroot=None, cwd=None, input=None, check_tools=True):
    """Runs argv (an aarch64 program for aarch64 boards) under the board's qemu with CPU
    model `cpu` (one of board.qemu_cpus; ignored for the host board). Returns a
    subprocess.CompletedProcess with text stdout/stderr. Raises MissingToolError when
    qemu or the sysroot is absent, subprocess.TimeoutExpired after `timeout` seconds."""
    board = boards.load(board)
    if check_tools:
        prereqs.require(*prereqs.for_run(board))
    return subprocess.run(command(board, argv, sysroot), env=environment(board, cpu, env, sysroot),
                          capture_output=True, text=True, timeout=timeout, cwd=cwd, input=input)
