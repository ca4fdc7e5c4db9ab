"""scripts/ab_pairs.py end to end on the embedded model, small: a build against
itself, every pair either kept under a placement or counted as dropped."""
import json
import pathlib
import subprocess
import sys

from edgerun._ffi import LIBRARY

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ab_pairs.py"


def test_a_build_against_itself_in_pairs():
    lib = str(LIBRARY)
    r = subprocess.run([sys.executable, str(SCRIPT), lib, lib, "--pairs", "4", "--gen-tokens", "16", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    kept = sum(s["pairs"] for s in res["by_placement"].values())
    assert kept + res["dropped"] == 4 and res["threads"] == 2
    assert set(res["by_placement"]) <= {"near", "far", "unknown"}
    for s in res["by_placement"].values():
        assert s["a"] > 0 and s["b"] > 0
        assert s["ratio_range"][0] <= s["ratio"] <= s["ratio_range"][1]


def test_each_side_can_force_its_kernel_table():
    lib = str(LIBRARY)
    r = subprocess.run([sys.executable, str(SCRIPT), lib, lib, "--pairs", "1", "--gen-tokens", "8", "--json",
                        "--isa-a", "generic"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["isa_a"] == "generic" and res["isa_b"] != "?"
    r = subprocess.run([sys.executable, str(SCRIPT), lib, lib, "--pairs", "1", "--isa-b", "nonexistent"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "with table nonexistent did not start" in r.stderr


def test_placement_rule():
    sys.path.insert(0, str(ROOT / "scripts"))
    import ab_pairs
    assert ab_pairs.placement(80.0, 95.0) == "near"
    assert ab_pairs.placement(330.0, 560.0) == "far"
    assert ab_pairs.placement(80.0, 330.0) is None       # moved during the pair: dropped
    assert ab_pairs.placement(None, None) == "unknown"   # one CPU, or no edgerun-corelat
    s = ab_pairs.summarize([("near", 100.0, 110.0), ("near", 100.0, 90.0), ("near", 200.0, 200.0),
                            ("far", 50.0, 60.0)])
    assert s["near"]["pairs"] == 3 and s["near"]["ratio"] == 1.0 and s["near"]["ratio_range"] == [0.9, 1.1]
    assert s["far"]["ratio"] == 1.2 and "unknown" not in s


def test_missing_library_is_one_clear_error():
    r = subprocess.run([sys.executable, str(SCRIPT), "/nonexistent/libedgerun.so", str(LIBRARY)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such library" in r.stderr
