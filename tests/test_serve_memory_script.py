"""scripts/serve_memory.py (where `edgerun serve`'s memory goes): it runs the
soak's request mix against a live server, in this process and in a process of
its own, and prints real samples. It reports; growth is not judged here (the
soak test does that)."""
import re
import subprocess
import sys

import pytest

from serve_helpers import REPO, need_serve

need_serve()
SCRIPT = REPO / "scripts" / "serve_memory.py"


def _rows(out):
    """{column: [values per sample]} from the script's table."""
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.strip().startswith("requests"))
    cols = lines[head].split()[1:]
    vals = [ln.split()[1:] for ln in lines[head + 1:] if re.match(r"^\s+\d+\s", ln)]
    return {c: [int(v[i]) for v in vals] for i, c in enumerate(cols)}


@pytest.mark.parametrize("mode", [[], ["--process"]], ids=["in-process", "process"])
def test_samples_are_real(mode):
    if not (REPO / "scripts").is_dir() or sys.platform != "linux":
        pytest.skip("needs Linux /proc")
    r = subprocess.run([sys.executable, str(SCRIPT), "--batches", "1", "--per-batch", "20", "--warmup", "10",
                        *mode], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = _rows(r.stdout)
    assert len(rows["rss"]) == 2 and all(v > 10_000 for v in rows["rss"])        # kB of a live interpreter
    assert all(v > 0 for v in rows["sm_file"]) and all(v > 0 for v in rows["py_blocks"])
    assert "failed so far 0" in r.stdout
    if "heap_used" in rows:                                                       # glibc
        assert all(v > 0 for v in rows["heap_used"])
