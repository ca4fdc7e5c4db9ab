"""scripts/bench_latency.py (make bench-latency) end to end on the embedded
model, small: its JSON carries the latency figures and what other work took
the machine while the tokens were timed."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_latency_report_names_the_machines_other_work():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_latency.py"), "--tokens", "3000", "--opens", "1",
                        "--requests", "5", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["tokens"] == 3000 and 0 < res["token_us"]["p50"] <= res["token_us"]["p99"]
    m = res["interference"]
    if pathlib.Path("/proc/stat").exists():
        assert m["seconds"] >= 0 and m["other_cpus"] >= 0 and 0 <= m["steal_share"] <= 1
        assert isinstance(m["busy"], bool)
    else:
        assert m is None
