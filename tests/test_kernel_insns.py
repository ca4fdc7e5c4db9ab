"""scripts/kernel_insns_qemu.sh: instructions an Arm kernel table executes for one
matrix product under qemu, file layout against repacked (how docs/PERFORMANCE.md
counts the SVE layouts' work without Arm hardware), and for the activation
quantizers, NEON against generic. Runs the Q8_0 rows only (about 40 s on 2 cores);
skipped without the aarch64 cross compiler or qemu-aarch64."""
import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_repacked_layouts_execute_fewer_instructions(tmp_path):
    r = subprocess.run(["sh", str(REPO / "scripts" / "kernel_insns_qemu.sh")], capture_output=True, text=True,
                       timeout=900, env=dict(os.environ, TYPES="q8_0", BUILD=str(tmp_path)))
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    rows = re.findall(r"^\| (\S+) \| (\d+) bits \| q8_0 \| (\d+) -> (\d+) \| (\d+) -> (\d+) \|$", r.stdout, re.M)
    assert [(t, int(v)) for t, v, *_ in rows] == [("sve", 256), ("sve", 512), ("sve", 128), ("neon-dotprod", 128),
                                                  ("neon-i8mm", 128)]
    counts = {(t, int(v)): tuple(int(c) for c in cs) for t, v, *cs in rows}
    for (table, bits), (d_file, d_rep, p_file, p_rep) in counts.items():
        assert 0 < d_rep < d_file and 0 < p_rep < p_file, (table, bits, r.stdout)
        # a prefill tile of 4 shares the weights: less than 4 single-row products
        assert p_rep < 4 * d_rep, (table, bits, r.stdout)
    # one row per 32-bit lane: twice the vector, about half the instructions
    assert counts[("sve", 512)][1] < 0.6 * counts[("sve", 256)][1]
    assert counts[("sve", 256)][1] < 0.6 * counts[("sve", 128)][1]
    # SMMLA: two activation rows per instruction, fewer instructions than SDOT for prefill
    assert counts[("neon-i8mm", 128)][3] < counts[("neon-dotprod", 128)][3]
    # the activation quantizers: NEON's against generic's, one row of 768 and of 2,048
    quant = re.findall(r"^\| (\d+) \| (\d+) -> (\d+) \| (\d+) -> (\d+) \|$", r.stdout, re.M)
    assert [int(n) for n, *_ in quant] == [768, 2048], r.stdout
    for n, g8, n8, gk, nk in quant:
        assert 0 < int(n8) < 0.5 * int(g8), (n, r.stdout)   # Q8_0
        assert 0 < int(nk) < 0.3 * int(gk), (n, r.stdout)   # Q8_K: generic's is a scalar loop
