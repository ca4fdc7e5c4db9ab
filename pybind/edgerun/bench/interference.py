"""How much of the machine other work took while a benchmark ran.

The load average after a run cannot tell a quiet run from a disturbed one:
it counts the run itself (the matrix's engine threads leave the 1-minute
figure near 1.3 on a 2-CPU machine however idle the machine was). /proc/stat
can. The CPU time every process used, less what this process and its reaped
children used, is what everything else took; steal is the time the
hypervisor gave this guest's CPUs to other guests, which no process in the
guest sees.

Linux only: elsewhere snapshot() returns None and measure() None, and callers
fall back to the load average before the run.
"""

import os
import time

# A run is flagged busy when other processes averaged this many CPUs or more,
# or the hypervisor took this share of the CPUs' time: either slows the
# engines by more than the spread a quiet run shows.
BUSY_OTHER_CPUS = 0.25
BUSY_STEAL = 0.05


def snapshot(stat_path="/proc/stat"):
    """Counters at one moment: system-wide CPU ticks and this process's CPU
    seconds (its own and its waited-for children's). None where /proc/stat
    cannot be read."""
    try:
        with open(stat_path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 8 or fields[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq [steal [guest guest_nice]]:
    # guest time is already inside user and nice, so it is not added again
    v = [int(x) for x in fields[1:9]] + [0] * (9 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    t = os.times()
    return {"wall": time.monotonic(), "busy_ticks": user + nice + system + irq + softirq, "steal_ticks": steal,
            "total_ticks": user + nice + system + idle + iowait + irq + softirq + steal,
            "own_seconds": t.user + t.system + t.children_user + t.children_system,
            "hz": os.sysconf("SC_CLK_TCK")}


def measure(before, after=None):
    """Other work between two snapshots (after: now when None): the CPUs that
    other processes used on average, the share of CPU time stolen, and
    whether either crosses the busy thresholds. None without snapshots.
    Children still running at `after` count as other work: reap them first."""
    if before is None:
        return None
    after = after if after is not None else snapshot()
    if after is None:
        return None
    wall = after["wall"] - before["wall"]
    total = after["total_ticks"] - before["total_ticks"]
    if wall <= 0 or total <= 0:
        return None
    used = (after["busy_ticks"] - before["busy_ticks"]) / before["hz"]
    others = max(0.0, used - (after["own_seconds"] - before["own_seconds"])) / wall
    steal = (after["steal_ticks"] - before["steal_ticks"]) / total
    return {"seconds": round(wall, 1), "other_cpus": round(others, 3), "steal_share": round(steal, 4),
            "busy": others >= BUSY_OTHER_CPUS or steal >= BUSY_STEAL}


def describe(m):
    """One line for a report, e.g. 'other processes 0.02 CPUs on average,
    hypervisor steal 0.4% of CPU time'."""
    return (f"other processes {m['other_cpus']:.2f} CPUs on average, hypervisor steal "
            f"{100 * m['steal_share']:.1f}% of CPU time")
