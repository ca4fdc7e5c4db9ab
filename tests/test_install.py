"""`pip install .` builds the C library through meson-python and installs a working
package: checked in a throwaway virtual environment, used from outside the checkout
so that nothing from the source tree can stand in for the installed files.

Offline by design: --no-build-isolation and --no-index, with the build tools
(meson-python, meson, ninja) and the dependencies (cffi, numpy) taken from the
environment running the tests. The test skips when those are missing.
"""
import importlib.util
import os
import pathlib
import shutil
import site
import subprocess
import sys
import sysconfig

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
MODEL = REPO / "models" / "edgerun-add.gguf"


def _missing_build_tools():
    missing = [m for m in ("mesonpy", "mesonbuild", "cffi", "numpy") if importlib.util.find_spec(m) is None]
    if shutil.which("ninja") is None and importlib.util.find_spec("ninja") is None:
        missing.append("ninja")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        missing.append("a C compiler")
    return missing


def _clean_env(venv):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "EDGERUN_LIB", "EDGERUN_HEADER", "EDGERUN_CLI", "VIRTUAL_ENV",
                        "LD_PRELOAD", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_pip_install_into_fresh_venv(tmp_path):
    missing = _missing_build_tools()
    if missing:
        pytest.skip(f"offline build needs {', '.join(missing)}")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    # The new venv sees the running environment's packages after its own (a .pth
    # line appends to sys.path), so the installed edgerun comes first and the
    # build tools and dependencies come from here.
    purelib = pathlib.Path(subprocess.check_output(
        [str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    parent_paths = [p for p in dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()["purelib"]])
                    if pathlib.Path(p).is_dir()]
    (purelib / "_edgerun_test_parent.pth").write_text("\n".join(parent_paths) + "\n")
    env = _clean_env(venv)

    # build-dir: meson-python would otherwise build inside the source tree.
    r = subprocess.run([str(vpy), "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--disable-pip-version-check", f"--config-settings=build-dir={tmp_path / 'build'}",
                        str(REPO)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])

    check = (
        "import pathlib, edgerun, edgerun._ffi as f\n"
        "print(pathlib.Path(edgerun.__file__).resolve().parent)\n"
        "print(pathlib.Path(f.LIBRARY).resolve())\n"
        "print(f.ffi.string(f.lib.er_version()).decode())\n"
    )
    r = subprocess.run([str(vpy), "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pkg_dir, lib_path, version = r.stdout.split("\n")[:3]
    assert pathlib.Path(pkg_dir).is_relative_to(venv.resolve()), pkg_dir
    assert pathlib.Path(lib_path).parent == pathlib.Path(pkg_dir), lib_path
    assert (pathlib.Path(pkg_dir) / "edgerun.h").is_file()
    import edgerun
    assert version == edgerun.__version__

    # The console scripts: the Python CLI and the native binary.
    r = subprocess.run([str(venv / "bin" / "edgerun"), "--version"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and edgerun.__version__ in r.stdout, r.stderr
    # Every verb's module made it into the wheel (a forgotten one only shows
    # when a user runs that verb).
    r = subprocess.run([str(vpy), "-c", "import importlib, edgerun.cli as c\n"
                        "[importlib.import_module('edgerun.cli.' + n) for n in c.COMMANDS]"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # Every module of every subpackage made it in (install_subdir copies folders whole).
    src = REPO / "pybind" / "edgerun"
    want = sorted(str(p.relative_to(src)) for p in src.rglob("*.py"))
    have = sorted(str(p.relative_to(pkg_dir)) for p in pathlib.Path(pkg_dir).rglob("*.py"))
    assert have == want, set(want) ^ set(have)
    r = subprocess.run([str(venv / "bin" / "edgerun-cli"), "--version"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"edgerun-cli {edgerun.__version__}", r.stderr

    if not MODEL.is_file():
        pytest.skip("models/edgerun-add.gguf is absent: the installed package has no default model to open")
    r = subprocess.run([str(vpy), "-c",
                        "import edgerun\n"
                        "m = edgerun.Model()\n"
                        "print(m.path)\n"
                        "print(m.generate('0012+0034=', max_tokens=8))\n"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    model_path, answer = r.stdout.split("\n")[:2]
    assert pathlib.Path(model_path).resolve().is_relative_to(venv.resolve())
    assert answer.strip(), r.stdout
