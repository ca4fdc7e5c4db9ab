"""edgerun.bench.interference: other processes' CPU use and hypervisor steal over
a benchmark's run, from /proc/stat."""
import os
import subprocess
import sys
import time

import pytest

from edgerun.bench import interference


def _snap(wall, busy, steal, total, own, hz=100):
    return {"wall": wall, "busy_ticks": busy, "steal_ticks": steal, "total_ticks": total, "own_seconds": own,
            "hz": hz}


def test_other_work_is_system_cpu_less_our_own():
    # 10 s, 2 CPUs (2,000 ticks): 900 busy ticks = 9 CPU-seconds, 6 of them ours
    m = interference.measure(_snap(0.0, 0, 0, 0, 1.0), _snap(10.0, 900, 20, 2000, 7.0))
    assert m == {"seconds": 10.0, "other_cpus": 0.3, "steal_share": 0.01, "busy": True}
    quiet = interference.measure(_snap(0.0, 0, 0, 0, 0.0), _snap(10.0, 600, 0, 2000, 5.5))
    assert quiet["other_cpus"] == pytest.approx(0.05) and not quiet["busy"]
    # our own CPU time beyond the system's count (tick rounding) is not negative work
    assert interference.measure(_snap(0.0, 0, 0, 0, 0.0), _snap(1.0, 50, 0, 200, 0.6))["other_cpus"] == 0.0


def test_steal_alone_marks_the_run_busy():
    m = interference.measure(_snap(0.0, 0, 0, 0, 0.0), _snap(10.0, 1000, 150, 2000, 10.0))
    assert m["other_cpus"] == 0.0 and m["steal_share"] == 0.075 and m["busy"]


def test_no_counters_no_measure():
    assert interference.measure(None) is None
    assert interference.measure(_snap(0.0, 0, 0, 0, 0.0), _snap(0.0, 0, 0, 0, 0.0)) is None


def test_snapshot_reads_the_aggregate_line(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 20 800 10 0 3 7 4 0\ncpu0 50 2 10 400 5 0 1 3 2 0\n")
    s = interference.snapshot(str(stat))
    assert s["busy_ticks"] == 100 + 5 + 20 + 3 and s["steal_ticks"] == 7
    assert s["total_ticks"] == 100 + 5 + 20 + 800 + 10 + 3 + 7  # guest is inside user: not added
    stat.write_text("cpu  100 5 20 800 10 0 3\n")  # kernels before steal was counted
    assert interference.snapshot(str(stat))["steal_ticks"] == 0
    stat.write_text("intr 1 2 3\n")
    assert interference.snapshot(str(stat)) is None
    assert interference.snapshot(str(tmp_path / "missing")) is None


@pytest.mark.skipif(not os.path.exists("/proc/stat") or (os.cpu_count() or 1) < 2,
                    reason="needs Linux /proc/stat and 2 CPUs")
def test_a_spinning_process_shows_as_other_work():
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time() + 3\nwhile time.time() < t: pass"])
    try:
        time.sleep(0.3)  # past the interpreter's start
        before = interference.snapshot()
        time.sleep(1.0)
        m = interference.measure(before)  # the spinner is not reaped yet: not ours
    finally:
        spin.kill()
        spin.wait()
    assert m["other_cpus"] >= 0.5 and m["busy"], m
    line = interference.describe(m)
    assert line.startswith("other processes ") and "CPUs on average" in line and "steal" in line
