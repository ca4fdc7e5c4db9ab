"""Board files and the board driver's pure-Python parts: schema validation (every
shipped board loads; each kind of mistake names its file and field), SVE vector
lengths, `edgerun boards`, build-dir naming, missing-tool messages, and the
model-check comparisons of `edgerun test --board`. Fast: nothing is compiled."""
import json
import pathlib
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")

from edgerun import boards  # noqa: E402
from edgerun.boards import build, prereqs, tests as board_test  # noqa: E402
from edgerun.errors import BoardError, EdgerunError, MissingToolError  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
SHIPPED = ["armv9-sve2", "cortex-a53", "host", "jetson-orin-nano", "neoverse-v1", "rk3588", "rpi5"]


def edgerun(*args, env=None):
    import os
    e = dict(os.environ, PYTHONPATH=str(REPO / "pybind"))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True, text=True,
                          env=e, cwd=str(REPO), timeout=120)


def test_every_shipped_board_loads():
    assert boards.board_names() == SHIPPED
    for name in SHIPPED:
        b = boards.load(name)
        assert b.name == name
        assert all("native" not in f for f in b.cflags)
        if b.is_native:
            assert b.qemu_cpus == [] and b.toolchain_file() is None
        else:
            assert b.toolchain_file().is_file()
            assert b.qemu_cpus


def test_board_specifics():
    rpi5 = boards.load("rpi5")
    assert rpi5.cflags == ["-mcpu=cortex-a76"] and rpi5.qemu_cpus == ["cortex-a76"]
    assert "dotprod" in rpi5.features
    rk = boards.load("rk3588")
    assert rk.cores["big"]["cpus"] == [4, 5, 6, 7] and rk.cores["little"]["cpu"] == "cortex-a55"
    jetson = boards.load("jetson-orin-nano")
    assert jetson.cuda == {"arch": "sm_87"} and jetson.cuda_toolchain_file().is_file()
    assert "dotprod" not in boards.load("cortex-a53").features
    for name in ("neoverse-v1", "armv9-sve2"):
        b = boards.load(name)
        bits = {b.vector_bits(c) for c in b.qemu_cpus}
        assert {128, 256, 512} <= bits and b.sve_bits in bits
    assert "sve2" in boards.load("armv9-sve2").features


@pytest.mark.parametrize("spec,bits", [
    ("cortex-a76", None), ("max", 512), ("max,sve128=on", 128), ("max,sve256=on", 256),
    ("max,sve1024=on", 512),                   # default 64 bytes, capped by the largest enabled
    ("max,sve-default-vector-length=16", 128), ("max,sve-default-vector-length=256", 2048),
    ("max,sve512=on,sve-default-vector-length=256", 512), ("max,sve=off", None), ("a64fx", 512),
])
def test_vector_bits(spec, bits):
    assert boards.vector_bits(spec) == bits


def _write(tmp_path, name, data):
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


def _rpi5():
    return yaml.safe_load((REPO / "boards" / "rpi5.yaml").read_text())


def _sve():
    return yaml.safe_load((REPO / "boards" / "neoverse-v1.yaml").read_text())


def _set(d, path, value):
    keys = path.split(".")
    for k in keys[:-1]:
        d = d[k]
    if value is _DELETE:
        del d[keys[-1]]
    else:
        d[keys[-1]] = value


_DELETE = object()

BROKEN = [
    # (base, field path, new value, expected message fragment)
    (_rpi5, "qemu.cpus", ["cortex-a76", "cortex-a99"], "qemu.cpus[1]: unknown qemu CPU model 'cortex-a99'"),
    (_rpi5, "toolchain", _DELETE, "toolchain: missing (required)"),
    (_rpi5, "toolchain", "aarch64-linux-gnu-icc", "toolchain: no toolchain file toolchains/aarch64-linux-gnu-icc.ini"),
    (_rpi5, "cflags", ["-mcpu=native"], "cflags[0]: '-mcpu=native': never native"),
    (_rpi5, "cflags", ["-O2"], "cflags: needs an explicit -mcpu= or -march="),
    (_rpi5, "cflags", "-mcpu=cortex-a76", "cflags: expected a list, got str"),
    (_rpi5, "memory.budget_mib", "lots", "memory.budget_mib: expected an integer, got str 'lots'"),
    (_rpi5, "memory.budget_mib", 99999, "memory.budget_mib: 99999 MiB exceeds the board's RAM"),
    (_rpi5, "memory.ram_mib", True, "memory.ram_mib: expected an integer, got boolean true"),
    (_rpi5, "arch", "riscv64", "arch: unknown architecture 'riscv64'"),
    (_rpi5, "features", ["neon", "avx2"], "features[1]: unknown aarch64 feature 'avx2'"),
    (_rpi5, "qemu.cpus", ["cortex-a53"], "qemu.cpus[0]: qemu model 'cortex-a53' lacks fp16, dotprod"),
    (_rpi5, "qemu.cpus", [], "qemu.cpus: empty"),
    (_rpi5, "qemu.cpus", ["cortex-a76,sve256=on"], "qemu.cpus[0]: 'sve256' needs the 'max' model"),
    (_rpi5, "qemu.cpus", ["max,turbo=on"], "qemu.cpus[0]: unknown qemu CPU property 'turbo'"),
    (_rpi5, "qemu.binary", "qemu-x86_64", "qemu.binary: expected 'qemu-aarch64'"),
    (_rpi5, "cores.big.count", -1, "cores.big.count: must be >= 0"),
    (_rpi5, "ota.slots", ["a", "a"], "ota.slots: expected two distinct slot names"),
    (_rpi5, "latency.p99_over_p50_max", 0.5, "latency.p99_over_p50_max: must be >= 1"),
    (_rpi5, "cuda", {"arch": "ampere"}, "cuda.arch: expected sm_<compute capability>"),
    (_rpi5, "cuda", {"arch": "sm_72"}, "cuda.arch: toolchains/aarch64-linux-gnu-gcc-cuda.ini does not generate code for sm_72"),
    (_rpi5, "colour", "red", "colour: unknown field"),
    (_rpi5, "name", "rpi6", "name: 'rpi6' does not match the file name"),
    (_sve, "qemu.cpus", ["max,sve-default-vector-length=16", "max,sve-default-vector-length=32"],
     "qemu.cpus: an SVE board must be tested at 128, 256, 512 bits; no entry runs at 512"),
    (_sve, "sve_bits", _DELETE, "sve_bits: missing (required)"),
    (_sve, "sve_bits", 200, "sve_bits: must be a multiple of 128"),
    (_sve, "qemu.cpus", ["cortex-a76"], "qemu.cpus[0]: qemu model 'cortex-a76' lacks sve, i8mm, bf16"),
]


@pytest.mark.parametrize("base,field,value,fragment", BROKEN, ids=[f"{b[1]}-{i}" for i, b in enumerate(BROKEN)])
def test_broken_board_names_file_and_field(tmp_path, base, field, value, fragment):
    data = base()
    name = data["name"]
    _set(data, field, value)
    p = _write(tmp_path, name, data)
    with pytest.raises(BoardError) as e:
        boards.load_file(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: "), msg
    assert fragment in msg, msg
    assert "\n" not in msg
    assert isinstance(e.value, EdgerunError)


def test_not_yaml_and_not_a_mapping(tmp_path):
    p = _write(tmp_path, "bad", "name: bad\nqemu: [unclosed\n")
    with pytest.raises(BoardError, match=r"bad\.yaml: line \d+: not valid YAML"):
        boards.load_file(p)
    p = _write(tmp_path, "list", "- just\n- a list\n")
    with pytest.raises(BoardError, match=r"list\.yaml: expected a mapping of fields at the top level"):
        boards.load_file(p)


def test_unknown_board_lists_the_known_ones():
    with pytest.raises(BoardError) as e:
        boards.load("rpi9")
    assert str(e.value) == f"unknown board 'rpi9'; known boards: {', '.join(SHIPPED)}"
    with pytest.raises(BoardError, match="unknown board"):
        boards.load("../boards/rpi5")       # a name, never a path
    r = edgerun("build", "--board", "rpi9")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"edgerun: error: unknown board 'rpi9'; known boards: {', '.join(SHIPPED)}"]


def test_boards_cli_json_and_table():
    r = edgerun("boards", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [b["name"] for b in data] == SHIPPED
    by = {b["name"]: b for b in data}
    assert by["rpi5"]["cflags"] == ["-mcpu=cortex-a76"]
    assert by["armv9-sve2"]["qemu_vector_bits"] == {
        "max,sve-default-vector-length=16": 128, "max,sve-default-vector-length=32": 256,
        "max,sve-default-vector-length=64": 512}
    r = edgerun("boards")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["board", "arch"]
    assert any(ln.startswith("rpi5 ") and "-mcpu=cortex-a76" in ln for ln in lines)
    assert any(ln.startswith("neoverse-v1 ") and "SVE 128, 256, 512, 2048" in ln for ln in lines)


def test_boards_show():
    r = edgerun("boards", "show", "rpi5")
    assert r.returncode == 0, r.stderr
    assert "Raspberry Pi 5" in r.stdout and "-mcpu=cortex-a76" in r.stdout
    assert "qemu-aarch64" in r.stdout and "build/rpi5/" in r.stdout
    r = edgerun("boards", "show", "neoverse-v1")
    assert "128, 256, 512, 2048 bits" in r.stdout
    r = edgerun("boards", "show", "nope")
    assert r.returncode == 1 and "known boards: armv9-sve2" in r.stderr


def test_boards_check_command(tmp_path):
    data = _rpi5()
    data["qemu"]["cpus"] = ["cortex-a99"]
    p = _write(tmp_path, "rpi5", data)
    r = edgerun("boards", "check", str(p))
    assert r.returncode == 1
    assert f"{p}: qemu.cpus[0]: unknown qemu CPU model 'cortex-a99'" in r.stderr


def test_build_dir_names_and_machine_file():
    c = build.BuildConfig("rpi5")
    assert c.dir_name == "rpi5" and c.compiler == "gcc"
    assert "c_args = ['-mcpu=cortex-a76']" in c.machine_file_text()
    args = c.setup_args()
    assert args[:2] == ["--cross-file", str(REPO / "toolchains" / "aarch64-linux-gnu-gcc.ini")]
    assert "-Dpython=false" in args and "-Db_sanitize=none" in args
    c = build.BuildConfig("rpi5", "debug", ("undefined", "address"), "clang")
    assert c.dir_name == "rpi5-debug-clang-san-address-undefined"
    assert str(REPO / "toolchains" / "aarch64-linux-gnu-clang.ini") in c.setup_args()
    assert "-Db_sanitize=address,undefined" in c.setup_args()
    h = build.BuildConfig("host")
    assert "--native-file" in h.setup_args() and "c = 'gcc'" in h.machine_file_text()
    with pytest.raises(BoardError, match="unknown sanitizer 'memory'"):
        build.BuildConfig("rpi5", sanitize=("memory",))
    with pytest.raises(BoardError, match="unknown build type"):
        build.BuildConfig("rpi5", buildtype="fast")


def test_missing_tools_name_the_debian_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # nothing on PATH
    with pytest.raises(MissingToolError) as e:
        prereqs.require("aarch64-linux-gnu-gcc")
    assert str(e.value) == ("aarch64-linux-gnu-gcc not found (the aarch64 cross compiler); "
                            "install it: apt-get install gcc-aarch64-linux-gnu")
    with pytest.raises(MissingToolError, match="install it: apt-get install qemu-user$"):
        prereqs.require("qemu-aarch64")
    monkeypatch.setenv("EDGERUN_SYSROOT", str(tmp_path / "no-sysroot"))
    with pytest.raises(MissingToolError, match="apt-get install libc6-dev-arm64-cross$"):
        prereqs.require("sysroot")


def test_missing_sysroot_is_one_line_from_the_cli(tmp_path):
    r = edgerun("test", "--board", "rpi5", env={"EDGERUN_SYSROOT": str(tmp_path)})
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgerun: error: sysroot: ")
    assert lines[0].endswith("install it: apt-get install libc6-dev-arm64-cross")


def test_doctor_json_reports_every_check():
    r = edgerun("doctor", "--json")
    data = json.loads(r.stdout)
    names = {c["name"] for c in data["checks"]}
    assert {"meson", "ninja", "aarch64-linux-gnu-gcc", "qemu-aarch64", "sysroot", "pyyaml",
            "llama-cpp-python"} <= names
    for c in data["checks"]:
        assert c["ok"] or c["fix"], c
    assert r.returncode == (0 if data["ok"] else 1)
    assert data["ok"] == all(c["ok"] for c in data["checks"] if not c["optional"])


# ---- model-check comparisons (edgerun test --board) --------------------------------

def _rows(texts, logits):
    return [{"index": i, "text": t, "ids": [i, 2], "logits": lg} for i, (t, lg) in enumerate(zip(texts, logits))]


def test_check_answers():
    task = board_test._task()
    probs = [(12, 34), (999, 1)]
    good = [task.answer_text(a, b) for a, b in probs]
    ok, detail = board_test.check_answers(probs, _rows(good, [[], []]))
    assert ok and detail == "2/2 correct"
    ok, detail = board_test.check_answers(probs, _rows([good[0], "00001"], [[], []]))
    assert not ok and detail.startswith("1/2 correct; e.g. 0999+0001=")
    ok, _ = board_test.check_answers(probs, _rows(good[:1], [[]]))
    assert not ok


def test_compare_logits_tolerance():
    ref = _rows(["a", "b"], [[[1.0, -20.0]], [[0.5, 3.0]]])
    close = _rows(["a", "b"], [[[1.0 + 1e-5, -20.0 - 1e-5]], [[0.5, 3.0]]])
    ok, detail, worst = board_test.compare_logits(close, ref)
    assert ok and worst == pytest.approx(1e-5, rel=1e-3)
    # 20 * rtol + atol = 0.021: 0.015 off on a logit of -20 passes, 0.03 does not
    ok, _, _ = board_test.compare_logits(_rows(["a", "b"], [[[1.0, -20.015]], [[0.5, 3.0]]]), ref)
    assert ok
    ok, detail, _ = board_test.compare_logits(_rows(["a", "b"], [[[1.0, -20.03]], [[0.5, 3.0]]]), ref)
    assert not ok and "prompt 0, step 0" in detail
    other = _rows(["a", "b"], [[[1.0, -20.0]], [[0.5, 3.0]]])
    other[1]["ids"] = [5, 2]
    ok, detail, _ = board_test.compare_logits(other, ref)
    assert not ok and "differ from the host's" in detail


def test_parse_eval_output():
    out = ('{"model": "m.gguf", "isa": "neon", "isa_reason": "x", "n_vocab": 2, "n_threads": 1, '
           '"n_prompts": 1, "arena_bytes": 10}\n'
           '{"index": 0, "text": "12", "ids": [4, 2], "n_prompt": 3, "n_gen": 2, "stop": "end of text", '
           '"ttft_ms": 1.5, "decode_ms": 0.5, "logits": [[0.25, -1], [1e-09, 2]]}\n')
    header, rows = board_test.parse_eval(out)
    assert header["isa"] == "neon" and rows[0]["logits"][1] == [1e-09, 2]
    with pytest.raises(BoardError):
        board_test.parse_eval("")
