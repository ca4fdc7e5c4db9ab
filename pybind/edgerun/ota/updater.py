"""edgerun.ota: verify, install, health-check, activate, roll back and report
A/B slots, for on-device control scripts and for `edgerun flash`.

A device root (a folder) holds:

    <root>/rootfs-a/        slot A: bin/ lib/ python/ models/ edgerun.yaml manifest.json
    <root>/rootfs-b/        slot B
    <root>/current          symlink -> the active slot (rootfs-a or rootfs-b)
    <root>/history.jsonl    one JSON object per event (install, activate, rollback, ...)

Safety rests on three rules, so that killing the installer at any instant
leaves a complete, working active slot:
  1. the active slot is never written: only the inactive one, and first under
     `.<slot>.partial`, which is renamed to `<slot>` only once every file is
     written, fsynced and matches the manifest's sha256 (a slot folder that
     exists is complete);
  2. the new slot is health-checked (its own runtime runs its own model and
     must produce the manifest's expected text) before anything points at it;
  3. switching is one rename(2) of a fresh symlink over `current`.

    import edgerun.ota as ota
    b = ota.verify("update.swu", cert="/etc/edgerun/cert.pem", hardware="raspberrypi5", revision="1.0")
    ota.install(b, "/opt/edgerun")          # inactive slot, health check, switch
    print(ota.report("/opt/edgerun"))
    ota.rollback("/opt/edgerun")            # back to the other slot (checked first)

Everything that touches the device goes through a Target (LocalTarget here,
edgerun.ota.flash.SshTarget over ssh), so `edgerun flash` and on-device scripts
run the same code.
"""
import contextlib
import errno
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tarfile
import tempfile
import time

from . import cpio, device_config, package, swdesc
from ..errors import OtaError
from .keygen import openssl

LINK = "current"
HISTORY = "history.jsonl"
_CHUNK = 1 << 20


# ================================================================== bundles

class Bundle:
    """A verified bundle: `version`, `hardware`, `revisions`, `manifest` (dict),
    `collections` ({"slot-a": [file entries], ...}), and the open archive."""

    def __init__(self, path, f, entries, software, hw_node, hardware, manifest):
        self.path = pathlib.Path(path)
        self._f = f
        self.entries = {e.name: e for e in entries}
        self.software = software
        self.version = str(software["version"])
        self.hardware = hardware
        self.revisions = [str(r) for r in hw_node.get("hardware-compatibility", [])]
        self.collections = dict(hw_node.get(package.COLLECTION, {}))
        self.manifest = manifest

    def open_entry(self, name):
        """A file-like reader of one member (reads from the archive as needed)."""
        e = self.entries[name]
        return _EntryReader(self._f, e)

    def read(self, name):
        return cpio.read_entry(self._f, self.entries[name])

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<edgerun.ota.Bundle {self.path.name} {self.version} for {self.hardware}>"


class _EntryReader:
    def __init__(self, f, entry):
        self.f, self.entry, self.pos = f, entry, 0

    def read(self, n=-1):
        left = self.entry.size - self.pos
        if n is None or n < 0 or n > left:
            n = left
        if n == 0:
            return b""
        self.f.seek(self.entry.offset + self.pos)
        b = self.f.read(n)
        self.pos += len(b)
        return b


def _sha256_entry(f, e):
    h = hashlib.sha256()
    f.seek(e.offset)
    left = e.size
    while left:
        b = f.read(min(_CHUNK, left))
        if not b:
            raise OtaError(f"bundle truncated inside {e.name}")
        h.update(b)
        left -= len(b)
    return h.hexdigest()


def check_signature(desc_bytes, sig_bytes, cert):
    """Verifies the CMS signature of sw-description against the trusted
    certificate, with the checks SWUpdate makes (S/MIME signing purpose)."""
    with tempfile.TemporaryDirectory(prefix="edgerun-verify-") as td:
        d, s = pathlib.Path(td) / "sw-description", pathlib.Path(td) / "sw-description.sig"
        d.write_bytes(desc_bytes)
        s.write_bytes(sig_bytes)
        r = subprocess.run([openssl(), "cms", "-verify", "-binary", "-inform", "DER", "-in", str(s),
                            "-content", str(d), "-CAfile", str(cert), "-purpose", "smimesign",
                            "-out", os.devnull], capture_output=True, text=True)
    if r.returncode != 0:
        why = [ln for ln in r.stderr.splitlines() if ln.strip()]
        raise OtaError(f"the bundle's signature does not verify with {cert} "
                       f"({why[-1] if why else 'openssl cms -verify failed'}); it is not signed by the "
                       "key this device trusts, or sw-description was altered")


def verify(path, cert, hardware=None, revision=None, min_version=None):
    """Opens and fully checks a bundle; returns a Bundle (close it when done).

    Checks: canonical cpio structure and checksums; sw-description first and
    its signature second; the CMS signature against `cert`; every image's
    sha256 against sw-description; no unreferenced member; the manifest
    agreeing with sw-description; hardware/revision when given; version not
    below min_version when given. Raises OtaError naming the first failure."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise OtaError(f"{path}: no such bundle file")
    if not pathlib.Path(cert).is_file():
        raise OtaError(f"{cert}: no such certificate; pass the certificate the bundles are signed with")
    try:
        f, entries = cpio.open_index(path)
    except cpio.CpioError as e:
        raise OtaError(f"{path.name} is damaged or not an update bundle: {e}") from None
    try:
        return _verify_open(path, f, entries, cert, hardware, revision, min_version)
    except BaseException:
        f.close()
        raise


def _verify_open(path, f, entries, cert, hardware, revision, min_version):
    names = [e.name for e in entries]
    if not names or names[0] != "sw-description":
        raise OtaError(f"{path.name} is not an update bundle: its first member must be sw-description")
    if len(names) < 2 or names[1] != "sw-description.sig":
        raise OtaError(f"{path.name} is unsigned (no sw-description.sig after sw-description); "
                       "this device installs signed bundles only")
    desc = cpio.read_entry(f, entries[0])
    check_signature(desc, cpio.read_entry(f, entries[1]), cert)
    try:
        software = swdesc.parse(desc.decode("utf-8"))["software"]
    except (KeyError, UnicodeDecodeError, swdesc.SwDescriptionError) as e:
        raise OtaError(f"{path.name}: signed sw-description is not one edgerun writes: {e}") from None
    nodes = {k: v for k, v in software.items() if isinstance(v, dict) and "hardware-compatibility" in v}
    if len(nodes) != 1 or "version" not in software:
        raise OtaError(f"{path.name}: sw-description must hold a version and exactly one hardware node")
    hw, node = next(iter(nodes.items()))
    if hardware is not None and hw != hardware:
        raise OtaError(f"{path.name} is for hardware {hw!r}, this device is {hardware!r}; "
                       f"package the model for this board (edgerun package --board ...)")
    revs = [str(r) for r in node["hardware-compatibility"]]
    if revision is not None and str(revision) not in revs:
        raise OtaError(f"{path.name} is for {hw} revision {', '.join(revs)}, this device is revision {revision}")
    version = str(software["version"])
    if min_version is not None and package.version_key(version) < package.version_key(min_version):
        raise OtaError(f"{path.name} holds version {version}, older than the installed {min_version}; "
                       "downgrades are refused (drop --no-downgrade to allow)")

    by_name = {e.name: e for e in entries}
    referenced = {}
    groups = [node.get("files", [])] + [c.get("files", []) for c in node.get(package.COLLECTION, {}).values()]
    for files in groups:
        for item in files:
            name, sha = item.get("filename"), item.get("sha256")
            if name not in by_name:
                raise OtaError(f"{path.name}: sw-description names {name!r}, which the bundle does not hold")
            if referenced.setdefault(name, sha) != sha:
                raise OtaError(f"{path.name}: sw-description gives {name} two different sha256 sums")
    for e in entries[2:]:
        if e.name not in referenced:
            raise OtaError(f"{path.name}: member {e.name!r} is not in the signed sw-description")
        got = _sha256_entry(f, e)
        if got != referenced[e.name]:
            raise OtaError(f"{path.name}: {e.name} does not match its signed sha256 (damaged or altered)")
    for m in package.MODES:
        if m not in node.get(package.COLLECTION, {}):
            raise OtaError(f"{path.name}: no {package.COLLECTION}.{m} collection in sw-description")
    try:
        manifest = json.loads(cpio.read_entry(f, by_name[package.MANIFEST]))
    except (KeyError, ValueError) as e:
        raise OtaError(f"{path.name}: no readable {package.MANIFEST}: {e}") from None
    if manifest.get("format") != package.FORMAT or manifest.get("version") != version \
            or manifest.get("hardware") != hw:
        raise OtaError(f"{path.name}: manifest disagrees with sw-description (format, version or hardware)")
    for img in manifest["images"]:
        if referenced.get(img["name"]) != img["sha256"]:
            raise OtaError(f"{path.name}: manifest and sw-description disagree about {img['name']}")
    return Bundle(path, f, entries, software, node, hw, manifest)


# ================================================================== targets

class LocalTarget:
    """A device root that is a folder of this machine (the device itself, or a
    device image mounted here). `runner(argv, timeout)` runs a slot's program
    (default: directly; edgerun.ota.flash passes one that goes through qemu)."""

    def __init__(self, root, runner=None):
        self.root = pathlib.Path(root)
        self.runner = runner
        self.name = str(self.root)

    def abspath(self, rel):
        return str(self.root / rel)

    def prepare(self):
        if not self.root.is_dir():
            raise OtaError(f"{self.root}: the device root does not exist (create it, or check the path)")

    def read_bytes(self, rel):
        try:
            return (self.root / rel).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def readlink(self, rel):
        try:
            return os.readlink(self.root / rel)
        except (FileNotFoundError, OSError):
            return None

    def is_dir(self, rel):
        p = self.root / rel
        return p.is_dir() and not p.is_symlink()

    def rmtree(self, rel):
        p = self.root / rel
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.exists():
            shutil.rmtree(p)

    def write_file(self, rel, src, mode=0o644):
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        with open(tmp, "wb") as out:
            for b in iter(lambda: src.read(_CHUNK), b""):
                out.write(b)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)

    def extract_tar(self, rel_dir, src):
        dest = self.root / rel_dir
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=src, mode="r|*") as t:
            for m in t:
                _check_member(m)
                t.extract(m, dest, set_attrs=True, filter="data" if hasattr(tarfile, "data_filter") else None)
        self._fsync_tree(dest)

    @staticmethod
    def _fsync_tree(d):
        for dirpath, _dirs, files in os.walk(d):
            for n in files:
                p = os.path.join(dirpath, n)
                if not os.path.islink(p):
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)

    def rename(self, src, dst):
        os.rename(self.root / src, self.root / dst)
        self._fsync_dir()

    def replace_symlink(self, link, target):
        tmp = self.root / f".{link}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.symlink(target, tmp)
        os.replace(tmp, self.root / link)       # rename(2): atomic
        self._fsync_dir()

    def _fsync_dir(self):
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def append_line(self, rel, line):
        fd = os.open(self.root / rel, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def sha256(self, rels):
        out = {}
        for rel in rels:
            p = self.root / rel
            try:
                out[rel] = package.sha256_file(p) if p.is_file() else None
            except OSError:
                out[rel] = None
        return out

    def free_bytes(self):
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def run(self, argv, timeout):
        if self.runner:
            return self.runner(argv, timeout)
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)


def _check_member(m):
    name = m.name
    if name.startswith("/") or ".." in pathlib.PurePosixPath(name).parts:
        raise OtaError(f"archive member {name!r} would land outside the slot")
    if not (m.isfile() or m.isdir() or m.issym()):
        raise OtaError(f"archive member {name!r} is not a file, folder or symlink")


# ================================================================== slots

def _slots(target, manifest=None):
    if manifest is not None:
        return list(manifest["slots"])
    for probe in ("rootfs-a", "rootfs-b"):
        m = _read_manifest(target, probe)
        if m:
            return list(m["slots"])
    return ["rootfs-a", "rootfs-b"]


def active_slot(target):
    """The slot `current` points at, or None on a fresh device."""
    link = target.readlink(LINK)
    return link.rstrip("/") if link else None


def _read_manifest(target, slot):
    raw = target.read_bytes(f"{slot}/{package.MANIFEST}")
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def history(target):
    """Events recorded on the device, oldest first (a line cut short by a power
    loss or a kill is skipped)."""
    raw = target.read_bytes(HISTORY) or b""
    out = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def record(target, action, **fields):
    ev = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "action": action, **fields}
    target.append_line(HISTORY, json.dumps(ev, sort_keys=True))
    return ev


def check_slot_files(target, slot):
    """(manifest, problems): a slot is complete when its manifest is readable
    and every file it lists has the recorded sha256."""
    m = _read_manifest(target, slot)
    if m is None:
        return None, [f"{slot}/{package.MANIFEST} is missing or unreadable"]
    files = m.get("files", {})
    sums = target.sha256([f"{slot}/{rel}" for rel in files])
    bad = [rel for rel, info in files.items() if sums.get(f"{slot}/{rel}") != info["sha256"]]
    return m, [f"{slot}/{rel} is missing or differs from the manifest" for rel in bad]


def health_check(target, slot, timeout=None):
    """Runs the slot's own runtime on the slot's own model with the slot's
    config; returns (ok, message). Checks the files against the manifest first."""
    m, problems = check_slot_files(target, slot)
    if problems:
        return False, problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
    raw_cfg = target.read_bytes(f"{slot}/{device_config.FILE_NAME}")
    try:
        cfg = device_config.loads(raw_cfg.decode(), f"{slot}/{device_config.FILE_NAME}")
    except Exception as e:       # noqa: BLE001 - reported as a failed check
        return False, f"{slot}: invalid configuration: {e}"
    model_rel = cfg["model"]["path"]
    if model_rel.startswith("/"):
        return False, f"{slot}/edgerun.yaml: model.path must be inside the slot, got {model_rel}"
    model = target.abspath(f"{slot}/{model_rel}")
    if target.sha256([f"{slot}/{model_rel}"]).get(f"{slot}/{model_rel}") is None:
        return False, f"{slot}: the model {model_rel} named by edgerun.yaml (model.path) is missing"
    hc = m["health_check"]
    argv = package.cli_argv(target.abspath(f"{slot}/bin/edgerun-cli"), model, hc, cfg)
    t = timeout or cfg["health_check"]["timeout_s"]
    try:
        r = target.run(argv, t)
    except subprocess.TimeoutExpired:
        return False, f"{slot}: the health check timed out after {t} s"
    except OSError as e:          # e.g. an aarch64 CLI on an x86 machine without qemu
        return False, f"{slot}: cannot run the slot's runtime: {e.strerror or e}"
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return False, f"{slot}: the runtime failed the health check: {err}"
    got = r.stdout.strip()
    if got != hc["expect"]:
        return False, f"{slot}: health check generated {got!r} for {hc['prompt']!r}, expected {hc['expect']!r}"
    return True, f"{slot}: {hc['prompt']!r} -> {got!r} as expected"


def _space_needed(manifest):
    return sum(i["bytes"] for i in manifest["files"].values()) + 64 * 1024


def install(bundle, target, allow_same_slot=False, check=True, progress=None):
    """Writes `bundle` (a verified Bundle) into the inactive slot of `target`
    (LocalTarget, SshTarget, or a folder path), health-checks it, switches
    `current` to it and records it. Returns the event dict. On any failure the
    active slot stays active and OtaError says why."""
    if not hasattr(target, "read_bytes"):
        target = LocalTarget(target)
    say = progress or (lambda msg: None)
    target.prepare()
    man = bundle.manifest
    slots = list(man["slots"])
    active = active_slot(target)
    if active is not None and active not in slots:
        raise OtaError(f"{target.name}: {LINK} points at {active!r}, not one of the slots {slots}")
    new = slots[1] if active == slots[0] else slots[0]
    mode = package.MODES[slots.index(new)]
    partial = f".{new}.partial"
    base = {"slot": new, "version": bundle.version, "from_slot": active,
            "from_version": (_read_manifest(target, active) or {}).get("version") if active else None}

    need = _space_needed(man)
    # The inactive slot's old contents and any leftover partial are removed
    # first: they are what the new slot replaces, and their space counts.
    say(f"removing the inactive slot {new}")
    target.rmtree(partial)
    if target.is_dir(new):
        # renamed away first, so a kill mid-delete never leaves a half slot
        # under the slot's own name
        target.rmtree(f".{new}.old")
        target.rename(new, f".{new}.old")
    target.rmtree(f".{new}.old")
    free = target.free_bytes()
    if free is not None and free < need:
        with contextlib.suppress(OSError, OtaError):
            record(target, "refused", ok=False, message=f"no space: {need} bytes needed, {free} free", **base)
        raise OtaError(f"{target.name}: not enough space for slot {new}: {need} bytes needed, {free} free; "
                       f"the active slot {active} is untouched")
    try:
        for item in bundle.collections[mode]["files"]:
            name = item["filename"]
            img = next(i for i in man["images"] + [{"name": package.MANIFEST, "dest": package.MANIFEST,
                                                      "type": "file"}] if i["name"] == name)
            say(f"writing {name} into {new}")
            src = bundle.open_entry(name)
            if img["type"] == "archive":
                target.extract_tar(partial, src)
            else:
                target.write_file(f"{partial}/{img['dest']}", src)
        m, problems = check_slot_files(target, partial)
        if problems:
            raise OtaError(f"slot {new} was not written correctly: {problems[0]}")
        target.rename(partial, new)
    except OSError as e:
        _cleanup(target, partial)
        if e.errno == errno.ENOSPC or "No space left" in str(e):
            raise OtaError(f"{target.name}: the disk filled up while writing slot {new}; the active slot "
                           f"{active} is untouched (free some space and flash again)") from None
        raise OtaError(f"{target.name}: writing slot {new} failed: {e}; the active slot {active} is "
                       "untouched") from None
    except BaseException:
        _cleanup(target, partial)
        raise
    record(target, "install", ok=True, **base)
    if check:
        say(f"health check of {new}")
        ok, msg = health_check(target, new)
        if not ok:
            record(target, "health-failed", ok=False, message=msg, **base)
            _cleanup(target, new)
            raise OtaError(f"health check failed, {new} not activated: {msg}; the device stays on "
                           f"{active or 'no slot'}")
    say(f"switching {LINK} -> {new}")
    target.replace_symlink(LINK, new)
    return record(target, "activate", ok=True, **base)


def _cleanup(target, rel):
    with contextlib.suppress(Exception):
        target.rmtree(rel)


def rollback(target, check=True):
    """Makes the other slot active again, if it is complete and (check=True)
    passes its health check. Returns the event dict."""
    if not hasattr(target, "read_bytes"):
        target = LocalTarget(target)
    active = active_slot(target)
    if active is None:
        raise OtaError(f"{target.name}: no active slot ({LINK} is missing); flash a bundle first")
    slots = _slots(target, _read_manifest(target, active))
    other = slots[1] if active == slots[0] else slots[0]
    if not target.is_dir(other):
        raise OtaError(f"{target.name}: nothing to roll back to: slot {other} is empty")
    m, problems = check_slot_files(target, other)
    if problems:
        raise OtaError(f"cannot roll back to {other}: {problems[0]}; staying on {active}")
    if check:
        ok, msg = health_check(target, other)
        if not ok:
            record(target, "rollback-refused", ok=False, slot=other, message=msg)
            raise OtaError(f"cannot roll back to {other}: {msg}; staying on {active}")
    target.replace_symlink(LINK, other)
    act = _read_manifest(target, active) or {}
    return record(target, "rollback", ok=True, slot=other, version=m.get("version"), from_slot=active,
                  from_version=act.get("version"))


def report(target):
    """Where the device stands: the active slot and what it runs, the other
    slot, and the last events."""
    if not hasattr(target, "read_bytes"):
        target = LocalTarget(target)
    active = active_slot(target)
    slots = _slots(target, _read_manifest(target, active) if active else None)
    out = {"root": target.name, "active": active, "slots": {}, "history": history(target)[-10:]}
    for s in slots:
        m = _read_manifest(target, s) if target.is_dir(s) else None
        out["slots"][s] = None if m is None else {
            "version": m.get("version"), "board": m.get("board"), "model": m.get("model", {}).get("file"),
            "edgerun_version": m.get("edgerun_version"), "created": m.get("created")}
    return out


# ================================================================== models

def swap(model, config, base=None):
    """Moves a running service to the model that `config` (edgerun.yaml, e.g.
    of the slot just activated) names; returns the model to use from now on.

    With an edgerun.LiveModel this is a live swap (er_live_swap in the C
    runtime): requests in flight finish on the old weights, new ones use the
    new model, nothing is dropped. With a plain edgerun.Model there is no live
    handle to swap in place, so the new model is opened first and the old one
    closed afterwards: a failure to open leaves the old model serving, but the
    caller must not have a generate() running on the old model while it is
    closed. (The runtime has no `er_model_swap(er_model **, er_model *)`; its
    live-swap API is the er_live handle that LiveModel wraps.)"""
    cfg = config if isinstance(config, device_config.DeviceConfig) else device_config.load(config)
    if hasattr(model, "swap") and callable(model.swap):
        path = cfg.model_path(base)
        if not path.is_file():
            raise OtaError(f"{path}: the model named by model.path does not exist")
        model.swap(path, **cfg.model_kwargs())
        return model
    new = device_config.open_model(cfg, base)
    if model is not None:
        model.close()
    return new
