"""Worker pinning from Python and the CLI: Model(cpu_mask=...), a board's core
clusters (Board.cpus) and `--pin`. The C side (threads really land on the
masked CPUs) is runtime_c/tests/test_pool_pin.c; here we check that the
options reach it and that bad values fail clearly."""
import os
import subprocess
import sys

import pytest

import edgerun
from edgerun import boards, errors
from edgerun.cli.options import parse_pin
from edgerun.model import cpu_mask_of

ONLINE = sorted(os.sched_getaffinity(0))


def test_cpu_mask_forms():
    assert cpu_mask_of(None) == 0
    assert cpu_mask_of([]) == 0
    assert cpu_mask_of([0, 2]) == 0b101
    assert cpu_mask_of(0b110) == 0b110
    for bad in ([64], [-1], ["1"], [True], -3, 1 << 64, 1.5):
        with pytest.raises(errors.InvalidArgumentError):
            cpu_mask_of(bad)


def test_model_pins_workers_to_an_allowed_cpu():
    # threads beyond the caller are pinned; generation still gives the answer
    with edgerun.Model(n_threads=2, cpu_mask=[ONLINE[-1]]) as m:
        assert m.generate("0012+0034=", max_tokens=6) == "64000"


def test_model_refuses_a_mask_with_no_usable_cpu():
    missing = next(c for c in range(64) if c not in ONLINE)
    with pytest.raises(errors.InvalidArgumentError, match="names no CPU"):
        edgerun.Model(n_threads=2, cpu_mask=[missing])


def test_board_clusters():
    assert boards.load("rk3588").cpus("big") == [4, 5, 6, 7]
    assert boards.load("rk3588").cpus("little") == [0, 1, 2, 3]
    assert boards.load("rpi5").cpus("big") == [0, 1, 2, 3]      # one cluster: numbered from 0
    with pytest.raises(errors.BoardError, match="no little cores"):
        boards.load("rpi5").cpus("little")
    with pytest.raises(errors.BoardError, match="unknown core cluster"):
        boards.load("rk3588").cpus("medium")


def test_parse_pin():
    assert parse_pin("4-7") == [4, 5, 6, 7]
    assert parse_pin("0,2,5-6") == [0, 2, 5, 6]
    assert parse_pin("rk3588:big") == [4, 5, 6, 7]
    for bad in ("x", "7-4", "0-64", "1,,2"):
        with pytest.raises(ValueError, match="--pin"):
            parse_pin(bad)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True, text=True, timeout=120)


def test_cli_pin_runs_and_bad_pin_is_one_line():
    ok = _cli("run", "0012+0034=", "-n", "6", "--threads", "2", "--pin", str(ONLINE[0]))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().startswith("64000")
    bad = _cli("run", "0012+0034=", "--pin", "9-2")
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1 and "--pin" in bad.stderr
