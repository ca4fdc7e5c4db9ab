"""The board driver: board files, cross builds, qemu-user, board tests, the
board's own Python (sysroot, on-device scripts) and the tools it all needs.

    from edgerun import boards
    b = boards.load("rpi5")                        # boards/rpi5.yaml, validated

    board           Board, load(), load_all(), board_names(): boards/*.yaml and their schema
    build           `edgerun build`: meson cross builds into build/<board>/
    qemu            run a board's binaries under qemu-user (or directly on the host board)
    tests           `edgerun test`: C tests, answers and logits under each qemu CPU model
    sysroot         `edgerun sysroot`: an aarch64 Python with cffi and numpy
    device_python   `edgerun test --python`: examples/device/*.py on that Python
    prereqs         `edgerun doctor`: the tools each step needs, and where they come from
"""
from .board import (ACCELERATORS, ARCHES, FEATURES, QEMU_BINARIES, QEMU_CPU_FEATURES, SVE_DEFAULT_BITS,
                    SVE_REQUIRED_BITS, TOOLCHAIN_NATIVE, Board, board_names, boards_dir, load, load_all,
                    load_file, parse_cpu_spec, repo_root, toolchains_dir, validate, vector_bits)

__all__ = ["Board", "load", "load_all", "load_file", "board_names", "boards_dir", "toolchains_dir", "repo_root",
           "validate", "vector_bits", "parse_cpu_spec", "ARCHES", "FEATURES", "ACCELERATORS", "QEMU_BINARIES",
           "QEMU_CPU_FEATURES", "SVE_REQUIRED_BITS", "SVE_DEFAULT_BITS", "TOOLCHAIN_NATIVE"]
