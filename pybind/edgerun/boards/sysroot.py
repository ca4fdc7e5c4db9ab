"""`edgerun sysroot --board B`: an aarch64 Python 3 with cffi, numpy, rich, jinja2,
starlette, uvicorn and pyyaml in build/sysroot/<arch>/.

On-device control scripts (examples/device/) must run on the board's own
Python, not the host's: under qemu-user that needs the board's interpreter, C
library and extension modules in one folder that `qemu-aarch64 -L` treats as /.
This module assembles that folder from two sources:

  * Debian's packages for the board's architecture (python3.X, its standard
    library, libc6, libstdc++6 and everything they depend on), fetched with
    `apt-get download` and unpacked with `dpkg -x`;
  * the aarch64 wheels of cffi, numpy, rich, jinja2, markupsafe, starlette,
    uvicorn and pyyaml from PyPI (`pip download --platform`, with what they depend on),
    unpacked into usr/lib/python3/dist-packages, where Debian's Python looks.

Nothing on the host changes: apt runs with a private state folder, source list
and cache under build/sysroot/.cache/ (no `dpkg --add-architecture`, no write
to /var/lib/apt or /etc/apt), and `dpkg -x` unpacks without touching dpkg's
database. A stamp keyed on the recipe makes a second run a no-op; the folder
is assembled beside its final place and renamed in, so an interrupted run never
leaves a half-built sysroot that looks finished.
"""
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

from ..errors import BoardError

# Bump when the assembly changes in a way an existing sysroot would not have.
RECIPE_VERSION = 1

# Board arch -> Debian architecture and the pip platform tags its wheels carry.
# Several manylinux tags: numpy publishes manylinux_2_28 wheels, cffi
# manylinux2014 ones; Debian 12's glibc (2.36) runs both.
ARCHES = {
    "aarch64": {"deb": "arm64", "pip": ("manylinux2014_aarch64", "manylinux_2_28_aarch64")},
}

# The Python packages the control scripts need on the device (and what pip
# pulls in with them: pycparser for cffi; markdown-it-py, mdurl and pygments
# for rich, which edgerun.console draws progress and tables with on a terminal).
# jinja2 renders chat templates (edgerun.chat, `edgerun chat` on the board);
# markupsafe is its dependency, named so that its compiled speedups are
# fetched for the board's CPython rather than left to pip's resolution.
# starlette and uvicorn run `edgerun serve` on the board (the `serve` extra);
# pip adds their pure-Python dependencies (anyio, idna, click, h11,
# typing_extensions), chosen for the board's Python version. pyyaml reads the
# device's edgerun.yaml (`edgerun serve --config /opt/edgerun`, edgerun.ota).
WHEELS = ("cffi", "numpy", "rich", "jinja2", "markupsafe", "starlette", "uvicorn", "pyyaml")

# libstdc++6: numpy's C++ extension modules link against it.
BASE_PACKAGES = ("libc6", "libstdc++6")

# Packages that only serve dpkg's maintainer scripts or tools the interpreter
# never runs (mailcap drags in perl). A sysroot is unpacked, never configured,
# so leaving them out loses nothing and saves ~40 MB.
EXCLUDE = frozenset({
    "dpkg", "perl", "perl-base", "perl-modules-5.36", "libperl5.36", "tar", "install-info",
    "debconf", "mailcap", "mime-support", "tzdata", "libgdbm-compat4",
})

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY = "http://deb.debian.org/debian-security"


class SysrootError(BoardError):
    """A step failed; the message names what to install or fix."""


# --------------------------------------------------------------------------- pure helpers
def arch_info(arch):
    info = ARCHES.get(arch)
    if info is None:
        if arch in ("x86_64", "x86-64", "amd64"):
            raise SysrootError(f"the board's arch is {arch}, the host's own: its Python runs natively, "
                               f"no sysroot is needed")
        raise SysrootError(f"no sysroot recipe for arch {arch!r}; known: {', '.join(sorted(ARCHES))}")
    return info


def debian_suite(os_release_text=None):
    """The Debian release to take packages from: $EDGERUN_DEBIAN_SUITE, else the
    host's when it is Debian (so host and sysroot share a glibc), else bookworm."""
    env = os.environ.get("EDGERUN_DEBIAN_SUITE")
    if env:
        return env
    if os_release_text is None:
        try:
            os_release_text = pathlib.Path("/etc/os-release").read_text()
        except OSError:
            os_release_text = ""
    fields = dict(re.findall(r'^([A-Z_]+)="?([^"\n]*)"?$', os_release_text, re.M))
    if fields.get("ID") == "debian" and fields.get("VERSION_CODENAME"):
        return fields["VERSION_CODENAME"]
    return "bookworm"


def sources_list(deb_arch, suite, mirror=DEFAULT_MIRROR, security=DEFAULT_SECURITY, keyring=KEYRING):
    opts = f"[arch={deb_arch} signed-by={keyring}]"
    lines = [f"deb {opts} {mirror} {suite} main", f"deb {opts} {mirror} {suite}-updates main"]
    if suite not in ("sid", "unstable"):
        lines.append(f"deb {opts} {security} {suite}-security main")
    return "\n".join(lines) + "\n"


def _bare(name):
    """'python3:any' -> 'python3'; '<debconf-2.0>' stays virtual (returned with brackets)."""
    return name.split(":", 1)[0] if not name.startswith("<") else name


def parse_depends(text):
    """Parses `apt-cache depends --recurse` output into
    {package: [[alternative, ...], ...]}: one inner list per dependency, its
    alternatives in order. A virtual package (<name>) is replaced by the real
    packages listed under it as its providers."""
    graph, pkg, deps, pending_or = {}, None, None, False
    providers_of = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if not raw.startswith(" "):            # a package block starts
            pkg = _bare(raw.strip())
            deps = graph.setdefault(pkg, [])
            pending_or, providers_of = False, None
            continue
        if deps is None:
            continue
        m = re.match(r"^ ([ |])([A-Za-z-]+): (\S+)", raw)
        if m:
            alt_or, _kind, name = m.groups()
            name = _bare(name)
            if pending_or and deps:
                deps[-1].append(name)
            else:
                deps.append([name])
            pending_or = alt_or == "|"
            providers_of = name if name.startswith("<") else None
            continue
        if raw.startswith("    ") and providers_of and deps:
            # A provider of the virtual package just named: try it in its place.
            alts = deps[-1]
            real = _bare(raw.strip())
            i = alts.index(providers_of) if providers_of in alts else len(alts)
            alts.insert(i, real)
    # Drop the virtual names themselves: they cannot be downloaded.
    return {p: [[a for a in alts if not a.startswith("<")] for alts in ds] for p, ds in graph.items()
            if not p.startswith("<")}


def resolve(graph, roots, exclude=EXCLUDE):
    """The packages to unpack: `roots` and, transitively, the first alternative
    of each dependency that the graph knows (an alternative already chosen wins),
    leaving out `exclude` and what only they need. Sorted, for a stable stamp."""
    chosen, todo = set(), [r for r in roots if r not in exclude]
    while todo:
        p = todo.pop()
        if p in chosen:
            continue
        if p not in graph:
            raise SysrootError(f"Debian package {p!r} is not in the package lists")
        chosen.add(p)
        for alts in graph[p]:
            alts = [a for a in alts if a in graph and a not in exclude]
            if not alts or any(a in chosen for a in alts):
                continue
            todo.append(alts[0])
    return sorted(chosen)


def python_version(depends_text):
    """'3.11' from `apt-cache depends python3` (its Depends: python3.11)."""
    m = re.search(r"Depends: python(3\.\d+)\b", depends_text)
    if not m:
        raise SysrootError("could not find the python3.X package that python3 depends on")
    return m.group(1)


def stamp_key(arch, suite, mirror, roots, wheels, py):
    text = json.dumps([RECIPE_VERSION, arch, suite, mirror, sorted(roots), sorted(EXCLUDE), list(wheels), py])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def relink_absolute(root):
    """Rewrites symlinks with absolute targets (/lib/..., /usr/share/...) into
    relative ones inside `root`. qemu -L looks a path up in the sysroot first,
    but the host kernel follows a symlink, and an absolute target would point
    at the host's own files (or nothing). Returns how many were rewritten."""
    root = pathlib.Path(root)
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = pathlib.Path(dirpath) / name
            if not p.is_symlink():
                continue
            target = os.readlink(p)
            if not target.startswith("/"):
                continue
            rel = os.path.relpath(root / target.lstrip("/"), p.parent)
            p.unlink()
            p.symlink_to(rel)
            n += 1
    return n


def tree_bytes(path):
    """Bytes of the regular files under path (symlinks not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            fp = os.path.join(dirpath, f)
            if not os.path.islink(fp):
                try:
                    total += os.path.getsize(fp)
                except OSError:
                    pass
    return total


# --------------------------------------------------------------------------- locations
def repo_root():
    """The checkout that holds pybind/ (where build/ lives); the working
    directory when the package runs from an installed wheel."""
    here = pathlib.Path(__file__).resolve().parents[3]
    return here if (here / "meson.build").is_file() else pathlib.Path.cwd()


def sysroot_dir(arch, root=None):
    return pathlib.Path(root or repo_root()) / "build" / "sysroot" / arch


def python_path(sysroot):
    """The interpreter inside a sysroot (an aarch64 ELF; run it under qemu)."""
    return pathlib.Path(sysroot) / "usr" / "bin" / "python3"


def read_stamp(sysroot):
    try:
        return json.loads((pathlib.Path(sysroot) / ".edgerun-sysroot.json").read_text())
    except (OSError, ValueError):
        return None


def is_ready(sysroot):
    st = read_stamp(sysroot)
    return bool(st) and python_path(sysroot).exists()


# --------------------------------------------------------------------------- the tools
class Apt:
    """apt-get/apt-cache against a private state folder: the host's package
    lists, dpkg status and architecture list are neither read nor written."""

    def __init__(self, state, deb_arch, sources):
        self.state = pathlib.Path(state)
        for sub in ("lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d",
                    "etc/apt.conf.d"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        (self.state / "status").touch()
        (self.state / "etc" / "sources.list").write_text(sources)
        s = str(self.state)
        self.opts = [
            "-o", f"Dir::Etc::SourceList={s}/etc/sources.list",
            "-o", f"Dir::Etc::SourceParts={s}/etc/sources.list.d",
            "-o", f"Dir::Etc::Preferences={s}/etc/preferences",
            "-o", f"Dir::Etc::PreferencesParts={s}/etc/preferences.d",
            "-o", f"Dir::State={s}", "-o", f"Dir::State::Lists={s}/lists",
            "-o", f"Dir::State::status={s}/status", "-o", f"Dir::Cache={s}/cache",
            "-o", f"APT::Architecture={deb_arch}", "-o", f"APT::Architectures::={deb_arch}",
            "-o", "Debug::NoLocking=1", "-o", "Acquire::Languages=none",
        ]
        if os.geteuid() == 0:
            # As root apt drops to the _apt user to download, which cannot write
            # into our build folder; a private download needs no sandbox.
            self.opts += ["-o", "APT::Sandbox::User=root"]

    def run(self, tool, args, cwd=None, quiet=True):
        cmd = [tool, *self.opts, *args]
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise SysrootError(f"{tool} {' '.join(args[:2])} failed: {' | '.join(tail)}")
        return r.stdout


def check_host_tools():
    missing = [t for t in ("apt-get", "apt-cache", "dpkg") if not shutil.which(t)]
    if missing:
        raise SysrootError(f"{', '.join(missing)} not found: edgerun sysroot needs a Debian or Ubuntu host "
                           f"(apt and dpkg)")
    if not os.path.exists(KEYRING):
        raise SysrootError(f"{KEYRING} is missing; install it: apt-get install debian-archive-keyring")


# --------------------------------------------------------------------------- assembly
def assemble(arch="aarch64", root=None, force=False, log=print, mirror=None):
    """Builds (or finds up to date) the sysroot for `arch`. Returns its stamp
    (dict: path, python, packages, wheels, bytes, cached)."""
    import time
    info = arch_info(arch)
    deb_arch = info["deb"]
    final = sysroot_dir(arch, root)
    cache = final.parent / ".cache" / arch
    mirror = mirror or os.environ.get("EDGERUN_DEBIAN_MIRROR", DEFAULT_MIRROR)
    suite = debian_suite()
    t0 = time.monotonic()

    check_host_tools()
    apt = Apt(cache / "apt", deb_arch, sources_list(deb_arch, suite, mirror,
                                                      os.environ.get("EDGERUN_DEBIAN_SECURITY", DEFAULT_SECURITY)))
    stamp = read_stamp(final)
    if stamp and not force and python_path(final).exists() and stamp.get("recipe") == RECIPE_VERSION \
            and stamp.get("suite") == suite and stamp.get("mirror") == mirror:
        # Check the full key without network: roots depend only on the python
        # version already recorded.
        key = stamp_key(arch, suite, mirror, stamp["roots"], WHEELS, stamp["python"])
        if key == stamp.get("key"):
            log(f"sysroot: {final} is up to date (Python {stamp['python']}, "
                f"{len(stamp['packages'])} Debian packages, {', '.join(stamp['wheels'])}); "
                f"{stamp['bytes'] / 2**20:.1f} MiB")
            return dict(stamp, cached=True)

    log(f"sysroot: [1/5] package lists for {deb_arch} ({suite}) into a private apt folder")
    apt.run("apt-get", ["update"])
    py = python_version(apt.run("apt-cache", ["depends", "python3"]))
    roots = [f"python{py}", f"libpython{py}-stdlib", *BASE_PACKAGES]
    key = stamp_key(arch, suite, mirror, roots, WHEELS, py)
    dep_text = apt.run("apt-cache", ["depends", "--recurse", "--no-recommends", "--no-suggests",
                                     "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *roots])
    packages = resolve(parse_depends(dep_text), roots)

    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    log(f"sysroot: [2/5] apt-get download: {len(packages)} packages (Python {py})")
    apt.run("apt-get", ["download", *packages], cwd=debs)
    files = {}
    for f in debs.glob("*.deb"):
        files.setdefault(f.name.split("_", 1)[0], []).append(f)
    missing = [p for p in packages if p not in files]
    if missing:
        raise SysrootError(f"apt-get download did not produce {', '.join(missing)}")

    wheels = cache / f"wheels-cp{py.replace('.', '')}"
    wheels.mkdir(parents=True, exist_ok=True)
    log(f"sysroot: [3/5] pip download {' '.join(WHEELS)} for {info['pip'][0]}, CPython {py}")
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
           "--python-version", py, "--implementation", "cp", "--abi", f"cp{py.replace('.', '')}",
           "--abi", "abi3", "--abi", "none", "-d", str(wheels)]
    for plat in info["pip"]:
        cmd += ["--platform", plat]
    r = subprocess.run(cmd + list(WHEELS), capture_output=True, text=True)
    if r.returncode != 0:
        tail = [ln for ln in r.stderr.strip().splitlines() if "ERROR" in ln][-2:] or r.stderr.strip().splitlines()[-2:]
        raise SysrootError(f"pip download failed: {' | '.join(tail)}")
    whl = sorted(wheels.glob("*.whl"))

    tmp = final.with_name(final.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"sysroot: [4/5] dpkg -x into {tmp.name}/")
    for i, p in enumerate(packages, 1):
        deb = max(files[p], key=lambda f: f.stat().st_mtime)   # the newest download of the package
        r = subprocess.run(["dpkg", "-x", str(deb), str(tmp)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SysrootError(f"dpkg -x {deb.name} failed: {r.stderr.strip()}")
        if i % 8 == 0 or i == len(packages):
            log(f"sysroot:       {i}/{len(packages)} packages unpacked")
    relinked = relink_absolute(tmp)
    exe = python_path(tmp)
    if not exe.exists():
        exe.symlink_to(f"python{py}")
    site = tmp / "usr" / "lib" / "python3" / "dist-packages"
    site.mkdir(parents=True, exist_ok=True)
    log(f"sysroot: [5/5] unpacking {len(whl)} wheels into usr/lib/python3/dist-packages")
    wheel_names = []
    for w in whl:
        with zipfile.ZipFile(w) as z:
            z.extractall(site)
            # zipfile drops the execute bit; shared objects need none, scripts are not used.
        wheel_names.append(w.name.split("-")[0] + "-" + w.name.split("-")[1])

    stamp = {"recipe": RECIPE_VERSION, "key": key, "arch": arch, "deb_arch": deb_arch, "suite": suite,
             "mirror": mirror, "python": py, "roots": roots, "packages": packages, "wheels": wheel_names,
             "symlinks_relinked": relinked, "path": str(final)}
    stamp["bytes"] = tree_bytes(tmp)
    (tmp / ".edgerun-sysroot.json").write_text(json.dumps(stamp, indent=1) + "\n")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    log(f"sysroot: {final} ready in {time.monotonic() - t0:.0f} s: Python {py}, {len(packages)} Debian packages, "
        f"{', '.join(wheel_names)}; {stamp['bytes'] / 2**20:.1f} MiB")
    return dict(stamp, cached=False)
