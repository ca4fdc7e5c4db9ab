"""`edgerun sysroot` and the on-device Python examples.

By default: the pure parts (dependency resolution from apt-cache's output,
the source list, the suite choice, relinking absolute symlinks on a real
folder) and the host-side Q8_0 copy switch_models.py uses. With -m long (needs
deb.debian.org and PyPI, and about a minute): the real assembly into a fresh
folder, an aarch64 python3 importing numpy and cffi under qemu, the stamp making
the second run a no-op, the host's dpkg state unchanged; then
examples/device/*.py against the rpi5 cross build.
"""
import hashlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pybind"))

from edgerun.boards import sysroot as sr  # noqa: E402

# Shape of `apt-cache depends --recurse` on Debian 12 (arm64), trimmed: an OR
# group (" |Depends:" then its alternative), a virtual package with providers,
# and a dependency on a package we leave out.
DEPENDS = """python3.11
  Depends: python3.11-minimal
  Depends: libpython3.11-stdlib
 |Depends: media-types
  Depends: mime-support
python3.11-minimal
  PreDepends: libc6
  Depends: libpython3.11-minimal
  Depends: zlib1g
libpython3.11-stdlib
  Depends: libpython3.11-minimal
 |Depends: media-types
  Depends: mime-support
  Depends: libc6
  Depends: <libffi-provider>
    libffi8
media-types
mime-support
  Depends: mailcap
  Depends: media-types
mailcap
  Depends: perl
perl
  Depends: perl-base
perl-base
  PreDepends: libc6
libc6
  Depends: libgcc-s1
libgcc-s1
  Depends: gcc-12-base
  Depends: libc6
gcc-12-base
libpython3.11-minimal
  Depends: libc6
  Depends: libssl3
libssl3
  Depends: libc6
zlib1g
  Depends: libc6
libffi8
  Depends: libc6
<libffi-provider>
  libffi8
"""


def test_wheels_cover_the_package_dependencies_and_the_serve_extra():
    """What pip would install with `edgerun[serve]` on the board is in the
    sysroot: a dependency added to pyproject.toml and not here would only fail
    under qemu (`make test-device-python`), which CI does not run."""
    import re
    tomllib = pytest.importorskip("tomllib")
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower()
             for d in proj["dependencies"] + proj["optional-dependencies"]["serve"]}
    assert {"cffi", "numpy", "starlette", "uvicorn"} <= names      # the parse found them
    assert names <= set(sr.WHEELS), sorted(names - set(sr.WHEELS))


def test_parse_depends_keeps_or_groups_and_replaces_virtual_packages():
    g = sr.parse_depends(DEPENDS)
    assert g["python3.11"] == [["python3.11-minimal"], ["libpython3.11-stdlib"], ["media-types", "mime-support"]]
    assert ["libffi8"] in g["libpython3.11-stdlib"]
    assert "<libffi-provider>" not in g
    assert g["media-types"] == []


def test_resolve_takes_first_alternatives_and_leaves_out_the_excluded():
    pk = sr.resolve(sr.parse_depends(DEPENDS), ["python3.11"])
    assert pk == sorted(["python3.11", "python3.11-minimal", "libpython3.11-stdlib", "libpython3.11-minimal",
                         "media-types", "libc6", "libgcc-s1", "gcc-12-base", "libssl3", "zlib1g", "libffi8"])
    # mime-support was only the second alternative; perl comes only through it.
    assert "mime-support" not in pk and "perl" not in pk and "perl-base" not in pk


def test_resolve_names_a_package_missing_from_the_lists():
    with pytest.raises(sr.SysrootError, match="python9.9"):
        sr.resolve(sr.parse_depends(DEPENDS), ["python9.9"])


def test_python_version_and_sources():
    assert sr.python_version("python3\n  PreDepends: python3-minimal\n  Depends: python3.11\n") == "3.11"
    with pytest.raises(sr.SysrootError):
        sr.python_version("python3\n  Depends: libc6\n")
    src = sr.sources_list("arm64", "bookworm")
    assert src.count("[arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]") == 3
    assert "bookworm-security" in src and "bookworm-updates" in src
    assert "security" not in sr.sources_list("arm64", "sid")


def test_debian_suite_follows_a_debian_host(monkeypatch):
    monkeypatch.delenv("EDGERUN_DEBIAN_SUITE", raising=False)
    assert sr.debian_suite('ID=debian\nVERSION_CODENAME=trixie\n') == "trixie"
    assert sr.debian_suite('ID=ubuntu\nVERSION_CODENAME=noble\n') == "bookworm"
    monkeypatch.setenv("EDGERUN_DEBIAN_SUITE", "bookworm")
    assert sr.debian_suite('ID=debian\nVERSION_CODENAME=trixie\n') == "bookworm"


def test_arch_info():
    assert sr.arch_info("aarch64")["deb"] == "arm64"
    with pytest.raises(sr.SysrootError, match="natively"):
        sr.arch_info("x86_64")
    with pytest.raises(sr.SysrootError, match="riscv64"):
        sr.arch_info("riscv64")


def test_relink_absolute_keeps_links_inside_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "usr/share/zoneinfo/Etc").mkdir(parents=True)
    (root / "usr/share/zoneinfo/Etc/UTC").write_text("utc")
    (root / "etc").mkdir()
    (root / "etc/localtime").symlink_to("/usr/share/zoneinfo/Etc/UTC")
    (root / "lib").mkdir()
    (root / "lib/rel").symlink_to("../etc")
    assert sr.relink_absolute(root) == 1
    assert os.readlink(root / "etc/localtime") == "../usr/share/zoneinfo/Etc/UTC"
    assert (root / "etc/localtime").read_text() == "utc"
    assert os.readlink(root / "lib/rel") == "../etc"


def _edgerun_lib_loads():
    try:
        from edgerun._ffi import lib  # noqa: F401
        return True
    except Exception:
        return False


@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="needs the gguf package")
def test_q8_0_copy_of_the_embedded_model_still_answers(tmp_path):
    if not _edgerun_lib_loads():
        pytest.skip("libedgerun.so not built (set EDGERUN_LIB or run make build)")
    import edgerun
    from edgerun.boards import device_python
    dst = tmp_path / "add-q8_0.gguf"
    device_python.write_q8_0_copy(ROOT / "models" / "edgerun-add.gguf", dst)
    with edgerun.Model(dst, n_threads=1) as m:
        types = {t["type"] for t in m.tensors()}
        assert types == {"Q8_0", "F32"}
        assert m.hparams["weight_bytes"] < (ROOT / "models" / "edgerun-add.gguf").stat().st_size / 3
        assert m.generate("0012+0034=", max_tokens=8) == "64000"
        assert m.generate("4821+5179=", max_tokens=8) == "00001"


# --------------------------------------------------------------------------- long: the real thing
def _dpkg_state():
    h = hashlib.sha256()
    for p in ("/var/lib/dpkg/status", "/var/lib/dpkg/arch"):
        try:
            h.update(pathlib.Path(p).read_bytes())
        except OSError:
            h.update(b"-")
    arch = subprocess.run(["dpkg", "--print-foreign-architectures"], capture_output=True, text=True).stdout
    return h.hexdigest(), arch


def _tools():
    need = ["apt-get", "dpkg", "qemu-aarch64"]
    return [t for t in need if not shutil.which(t)]


@pytest.mark.long
@pytest.mark.skipif(bool(_tools()), reason=f"needs {', '.join(_tools())}")
def test_assemble_real_sysroot_runs_numpy_and_cffi_under_qemu(tmp_path):
    before = _dpkg_state()
    lines = []
    st = sr.assemble("aarch64", root=tmp_path, log=lines.append)
    root = pathlib.Path(st["path"])
    assert not st["cached"] and root == tmp_path / "build" / "sysroot" / "aarch64"
    assert any("[2/5] apt-get download" in ln for ln in lines) and "MiB" in lines[-1]
    assert {"libc6", "libstdc++6", f"python{st['python']}"} <= set(st["packages"])
    assert "perl" not in st["packages"]
    assert st["bytes"] > 50 * 2**20
    # Nothing on the host changed: no foreign architecture, the same dpkg database.
    assert _dpkg_state() == before
    r = subprocess.run(["qemu-aarch64", "-L", str(root), str(sr.python_path(root)), "-c",
                        "import platform, numpy, cffi, _cffi_backend, jinja2, markupsafe._speedups, rich, "
                        "starlette.applications, uvicorn, yaml; "
                        "assert jinja2.Template('{{ x }}!').render(x='<a>') == '<a>!'; "
                        "print(platform.machine(), numpy.arange(4).dot(numpy.arange(4)), cffi.__version__)"],
                       capture_output=True, text=True, timeout=300, env={"PATH": os.environ["PATH"]})
    assert r.returncode == 0, r.stderr
    machine, dot, _ = r.stdout.split()
    assert machine == "aarch64" and dot == "14"
    # The stamp makes the second run a no-op.
    t0 = time.monotonic()
    lines.clear()
    again = sr.assemble("aarch64", root=tmp_path, log=lines.append)
    assert again["cached"] and "up to date" in lines[0] and time.monotonic() - t0 < 5


@pytest.mark.long
@pytest.mark.skipif(bool(_tools()) or not shutil.which("aarch64-linux-gnu-gcc"), reason="needs cross tools")
def test_device_examples_run_under_the_sysroot_python():
    """examples/device/*.py and `edgerun serve` against the rpi5 cross build
    (builds it and the sysroot in build/ when missing or out of date)."""
    from edgerun.boards import device_python
    res = device_python.run_examples("rpi5", log=lambda *a: None)
    assert {r["script"] for r in res} == {"answer.py", "stream_stats.py", "switch_models.py", "serve"}
    bad = [f"{r['script']}: {r['detail']}" for r in res if not r["ok"]]
    assert not bad, bad
