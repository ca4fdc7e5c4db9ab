"""`edgerun package`: a signed SWUpdate bundle (.swu) holding one slot's contents.

Layout of the bundle (cpio, 070702 "newc with checksum"; see edgerun.ota.cpio):

    sw-description            what to install where, sha256 of every image (libconfig)
    sw-description.sig        CMS (DER) signature of sw-description
    runtime-<board>.tar.gz    bin/edgerun-cli and lib/libedgerun.so built for the board
    python.tar.gz             python/edgerun/ (the package; libedgerun.so links to ../../lib)
    <model>.gguf              the model, installed as models/<model>.gguf
    edgerun.yaml              the device configuration (edgerun.ota.device_config)
    manifest.json             versions, sizes, sha256 of every installed file, health check

The runtime and the Python package travel as archives because SWUpdate's file
handler creates plain 0644 files: only its archive handler keeps the CLI
executable. sw-description has one software collection per slot,
`stable.slot-a` and `stable.slot-b`, under a node named after the board's OTA
hardware name, so `swupdate -H <hardware>:<revision> -e stable,slot-b` installs
into <root>/<slot B>/ and nothing else. Without -e, the bundle only drops its
manifest into <root>/incoming/: an update agent started without a selection
must not overwrite a slot, and `swupdate -c` still has something to check.
"""
import datetime
import gzip
import hashlib
import io
import json
import os
import pathlib
import subprocess
import tarfile
import tempfile

from . import cpio, device_config, swdesc
from .. import __version__, console
from ..errors import OtaError
from .keygen import openssl

COLLECTION = "stable"
MODES = ("slot-a", "slot-b")          # slot A, slot B in sw-description
MANIFEST = "manifest.json"
CONFIG = device_config.FILE_NAME
PYTHON_TAR = "python.tar.gz"
FORMAT = "edgerun-bundle/1"
DEFAULT_HEALTH_PROMPT = "0012+0034="    # the embedded addition model: 12 + 34, answer reversed
_PKG_DIR = pathlib.Path(__file__).resolve().parents[1]


def sha256_file(path, chunk=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(chunk), b""):
            h.update(b)
    return h.hexdigest()


def runtime_tar_name(board_name):
    return f"runtime-{board_name}.tar.gz"


def check_version(v):
    """SWUpdate compares versions as up to four dot-separated numbers; anything
    else would make -N (no downgrade) meaningless."""
    parts = str(v).split(".")
    if not 1 <= len(parts) <= 4 or not all(p.isdigit() and len(p) <= 5 for p in parts):
        raise OtaError(f"version {v!r} must be 1 to 4 dot-separated numbers (e.g. 1.2.0), as SWUpdate "
                       "compares them")
    return str(v)


def version_key(v):
    parts = [int(p) for p in str(v).split(".")]
    return tuple(parts + [0] * (4 - len(parts)))


# ------------------------------------------------------------------ archives

def _tar_add(tar, arcname, path=None, data=None, mode=0o644, link=None):
    info = tarfile.TarInfo(arcname)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if link is not None:
        info.type = tarfile.SYMTYPE
        info.linkname = link
        info.mode = 0o777
        tar.addfile(info)
        return
    if data is None:
        data = pathlib.Path(path).read_bytes()
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def _write_tar(out_path, members):
    """members: [(arcname, path|None, data|None, mode, link|None)]. gzip with
    mtime 0, so the same inputs give the same bytes."""
    with open(out_path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = set()
        for arc, path, data, mode, link in members:
            parent = arc.rsplit("/", 1)[0] if "/" in arc else None
            chain = []
            while parent and parent not in dirs:
                chain.append(parent)
                dirs.add(parent)
                parent = parent.rsplit("/", 1)[0] if "/" in parent else None
            for d in reversed(chain):
                info = tarfile.TarInfo(d)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                tar.addfile(info)
            _tar_add(tar, arc, path, data, mode, link)


def _python_members(header):
    out = []
    for p in sorted(_PKG_DIR.rglob("*.py")):
        rel = p.relative_to(_PKG_DIR)
        if "__pycache__" in rel.parts:
            continue
        out.append((f"python/edgerun/{rel.as_posix()}", p, None, 0o644, None))
    out.append(("python/edgerun/edgerun.h", header, None, 0o644, None))
    # edgerun._ffi looks for the library next to the package first
    out.append(("python/edgerun/libedgerun.so", None, None, 0, "../../lib/libedgerun.so"))
    return out


def tar_file_table(tar_path):
    """{relative path: {sha256, bytes, mode}} of the regular files in a tarball,
    and {path: target} of its symlinks."""
    files, links = {}, {}
    with tarfile.open(tar_path, "r:*") as t:
        for m in t.getmembers():
            if m.isfile():
                data = t.extractfile(m).read()
                files[m.name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                                 "mode": m.mode & 0o777}
            elif m.issym():
                links[m.name] = m.linkname
    return files, links


# ------------------------------------------------------------------ runtime

def find_runtime(board, build_dir=None, log=None):
    """(libedgerun.so, edgerun-cli) built for the board: from build_dir, else
    edgerun.boards.build.ensure_built(board) (build/<board>/)."""
    from ..boards import build
    if build_dir is None:
        build_dir = build.ensure_built(board, log=log)
    build_dir = pathlib.Path(build_dir)
    lib = build_dir / "runtime_c" / "libedgerun.so"
    cli = build_dir / "runtime_c" / "tools" / "edgerun-cli"
    for p in (lib, cli):
        if not p.is_file():
            raise OtaError(f"{p} is missing; build the runtime for {board.name} with "
                           f"`edgerun build --board {board.name}`")
        want = {"aarch64": "aarch64", "x86_64": "x86-64"}.get(board.arch)
        got = build.elf_machine(p)
        if want and got != want:
            raise OtaError(f"{p} is built for {got or 'an unknown machine'}, board {board.name} is {board.arch}")
    return lib, cli


def cli_argv(cli, model, hc, cfg):
    """edgerun-cli arguments of the health check (greedy, no echo)."""
    return [str(cli), "run", str(model), hc["prompt"], "-n", str(hc["max_tokens"]), "--temp", "0",
            "--no-echo", "-t", str(cfg["threads"]["count"]), "-c", str(cfg["model"]["n_ctx"] or 0),
            "--kv", cfg["model"]["kv_type"]]


def run_health_cli(board, cli, model, cfg, timeout=None):
    """What the board's runtime generates for the health-check prompt (under
    qemu for emulated boards): (ok, text_or_error)."""
    from ..boards import qemu
    hc = cfg["health_check"]
    argv = cli_argv(cli, model, hc, cfg)
    cpu = board.qemu_cpus[0] if board.qemu_cpus else None
    try:
        r = qemu.run(board, cpu, argv, timeout=timeout or hc["timeout_s"])
    except subprocess.TimeoutExpired:
        return False, f"timed out after {hc['timeout_s']} s"
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return False, f"edgerun-cli failed: {err}"
    return True, r.stdout.strip()


# ------------------------------------------------------------------ sw-description

def _file_entry(name, dest_path, sha, archive=False):
    e = {"filename": name, "path": dest_path, "sha256": sha, "properties": {"create-destination": "true"}}
    if archive:
        e["type"] = "archive"
    return e


def sw_description(version, board, images, root, slots, description):
    """images: [(cpio name, sha256, dest relative to the slot or '.' for archives,
    is_archive)]. Returns the text."""
    def collection(slot):
        base = f"{root.rstrip('/')}/{slot}"
        return {"files": [_file_entry(n, base if arch else f"{base}/{dest}", sha, arch)
                          for n, sha, dest, arch in images]}

    man_sha = next(sha for n, sha, _, _ in images if n == MANIFEST)
    hw = board.ota["hardware"]
    group = {
        "version": version,
        "description": description,
        hw: {
            "hardware-compatibility": [str(board.ota["revision"])],
            "files": [_file_entry(MANIFEST, f"{root.rstrip('/')}/incoming/{MANIFEST}", man_sha)],
            COLLECTION: {MODES[0]: collection(slots[0]), MODES[1]: collection(slots[1])},
        },
    }
    return swdesc.render("software", group)


def sign(text_path, key, cert, out_path):
    r = subprocess.run([openssl(), "cms", "-sign", "-in", str(text_path), "-out", str(out_path),
                        "-signer", str(cert), "-inkey", str(key), "-outform", "DER", "-nosmimecap",
                        "-binary"], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise OtaError(f"signing with {key} / {cert} failed: {last}; check that the key belongs to the "
                       "certificate (edgerun keygen makes a matching pair)")


# ------------------------------------------------------------------ package

def package(board, model, version, key, cert, out, config=None, root=None, build_dir=None,
            health_prompt=None, health_max_tokens=None, threads=None, log=None):
    """Builds the bundle `out`; returns its manifest (dict). With a `log` that is a
    terminal, a bar shows the steps (runtime, health check, images, signature)."""
    bar = console.progress("edgerun package", total=len(_STEPS), stream=log) if log else console.quiet()
    with bar:
        return _package(board, model, version, key, cert, out, config, root, build_dir, health_prompt,
                        health_max_tokens, threads, log, bar)


_STEPS = ("the board's runtime", "health check", "images", "signature")


def _package(board, model, version, key, cert, out, config, root, build_dir, health_prompt, health_max_tokens,
             threads, log, bar):
    from .. import boards
    board = boards.load(board)
    version = check_version(version)
    model = pathlib.Path(model)
    if not model.is_file():
        raise OtaError(f"{model}: no such model file; pass the GGUF file to ship with --model")
    for what, p in (("signing key", key), ("certificate", cert)):
        if not pathlib.Path(p).is_file():
            raise OtaError(f"{p}: no such {what}; make a pair with `edgerun keygen -o DIR`")
    slots = list(board.ota["slots"])
    model_rel = f"models/{model.name}"

    if config is not None:
        cfg = config if isinstance(config, device_config.DeviceConfig) else device_config.load(config)
        raw = json.loads(json.dumps(cfg.data))
        if raw["model"]["path"] != model_rel:
            raise OtaError(f"{cfg.path or CONFIG}: model.path is {raw['model']['path']!r}, but the bundle "
                           f"installs the model as {model_rel!r}; set model.path: {model_rel}")
    else:
        prompt = health_prompt or DEFAULT_HEALTH_PROMPT
        raw = device_config.make(model_rel, prompt, "?", threads=threads or 1,
                                 health_max_tokens=health_max_tokens or 6,
                                 budget_mib=board.memory.get("budget_mib") or 256).data
    if raw["slots"]["names"] != slots:
        if config is not None:
            raise OtaError(f"{CONFIG}: slots.names is {raw['slots']['names']}, board {board.name} has "
                           f"ota.slots {slots}")
        raw["slots"]["names"] = slots
    if root is not None:
        raw["slots"]["root"] = str(root)
    if health_prompt:
        raw["health_check"]["prompt"] = health_prompt
    if health_max_tokens:
        raw["health_check"]["max_tokens"] = health_max_tokens
    if threads:
        raw["threads"]["count"] = threads
    root = raw["slots"]["root"]

    bar.update(description=_STEPS[0])
    lib, cli = find_runtime(board, build_dir, log=log)
    bar.advance(1, _STEPS[1])
    header = _PKG_DIR.parent.parent / "runtime_c" / "include" / "edgerun.h"
    if not header.is_file():
        header = _PKG_DIR / "edgerun.h"
    if not header.is_file():
        raise OtaError("edgerun.h not found next to the package or in runtime_c/include")

    # The health check's expected text is what this very runtime generates,
    # run for the board (under qemu for Arm boards) before anything is signed:
    # a bundle whose own check fails must never leave the build machine.
    check_cfg = device_config.validate(dict(raw, health_check=dict(raw["health_check"], expect="-")))
    ok, got = run_health_cli(board, cli, model, check_cfg)
    if not ok:
        raise OtaError(f"the {board.name} runtime cannot run {model.name}: {got}")
    if config is not None and raw["health_check"]["expect"] not in (None, "?", got):
        raise OtaError(f"{CONFIG}: health_check.expect is {raw['health_check']['expect']!r}, but the "
                       f"{board.name} runtime generates {got!r} for {raw['health_check']['prompt']!r}")
    if not got:
        raise OtaError(f"the health-check prompt {raw['health_check']['prompt']!r} makes {model.name} "
                       "generate nothing; choose a prompt with a non-empty answer")
    raw["health_check"]["expect"] = got
    cfg = device_config.validate(raw, "<bundle config>")
    bar.advance(1, _STEPS[2])

    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".edgerun-package-", dir=out.parent) as td:
        td = pathlib.Path(td)
        rt_name = runtime_tar_name(board.name)
        _write_tar(td / rt_name, [("bin/edgerun-cli", cli, None, 0o755, None),
                                  ("lib/libedgerun.so", lib, None, 0o755, None)])
        _write_tar(td / PYTHON_TAR, _python_members(header))
        (td / CONFIG).write_text(cfg.to_yaml())

        files = {}
        for tar in (rt_name, PYTHON_TAR):
            f, _links = tar_file_table(td / tar)
            files.update(f)
        files[model_rel] = {"sha256": sha256_file(model), "bytes": model.stat().st_size, "mode": 0o644}
        files[CONFIG] = {"sha256": sha256_file(td / CONFIG), "bytes": (td / CONFIG).stat().st_size,
                         "mode": 0o644}
        images = [(rt_name, td / rt_name, ".", True), (PYTHON_TAR, td / PYTHON_TAR, ".", True),
                  (model.name, model, model_rel, False), (CONFIG, td / CONFIG, CONFIG, False)]
        suricatta = device_config.suricatta_cfg(cfg)
        if suricatta is not None:
            # the hawkbit section as SWUpdate's own config, beside edgerun.yaml in the slot
            scfg = device_config.SWUPDATE_CFG
            (td / scfg).write_text(suricatta)
            files[scfg] = {"sha256": sha256_file(td / scfg), "bytes": (td / scfg).stat().st_size, "mode": 0o644}
            images.append((scfg, td / scfg, scfg, False))
        manifest = {
            "format": FORMAT, "version": version, "edgerun_version": __version__,
            "board": board.name, "hardware": board.ota["hardware"], "revision": str(board.ota["revision"]),
            "arch": board.arch, "slots": slots,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "model": {"file": model_rel, "sha256": files[model_rel]["sha256"], "bytes": files[model_rel]["bytes"]},
            "health_check": {"prompt": cfg["health_check"]["prompt"], "expect": got,
                             "max_tokens": cfg["health_check"]["max_tokens"]},
            "images": [{"name": n, "sha256": sha256_file(p), "bytes": pathlib.Path(p).stat().st_size,
                        "dest": d, "type": "archive" if a else "file"} for n, p, d, a in images],
            "files": dict(sorted(files.items())),
        }
        (td / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
        images.append((MANIFEST, td / MANIFEST, MANIFEST, False))

        desc = sw_description(version, board, [(n, sha256_file(p), d, a) for n, p, d, a in images], root,
                              slots, f"edgerun {__version__} for {board.name}: {model.name}, bundle {version}")
        (td / "sw-description").write_text(desc)
        bar.advance(1, _STEPS[3])
        sign(td / "sw-description", key, cert, td / "sw-description.sig")
        bar.advance(1, "writing the bundle")

        tmp_out = td / "bundle.swu"
        with open(tmp_out, "wb") as f:
            w = cpio.Writer(f)
            w.add_file("sw-description", td / "sw-description")
            w.add_file("sw-description.sig", td / "sw-description.sig")
            for n, p, _, _ in images:
                w.add_file(n, p)
            w.close()
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_out, out)
    return manifest
