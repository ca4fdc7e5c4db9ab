"""`edgerun flash` / `edgerun rollback`: A/B install onto a device root that is a
folder here (`--target DIR`) or a folder on a machine reached over OpenSSH
(`--target ssh://user@host:port/path`).

Both kinds of target run the same steps (edgerun.ota.install): verify the
bundle against the board and the trusted certificate, write the inactive slot,
health-check it with its own runtime, switch `current` with one rename, record
the event. For a folder target and an Arm board the health check runs the
slot's aarch64 CLI under qemu-user (edgerun.boards.qemu); over ssh it runs on the
device itself.

The ssh target needs on the device: a POSIX shell, GNU coreutils (`mv -T`
renames a symlink over a symlink to a folder, where busybox mv would move it
into the folder; `sync FILE` fsyncs just that file, where a bare `sync` would
flush every filesystem), tar with gzip, find, sha256sum and df. Authentication is ssh's own: keys
from the agent or ~/.ssh, or --identity; extra `-o` options pass through.
"""
import os
import pathlib
import shlex
import subprocess
import tempfile
import urllib.parse

from . import updater as ota
from .. import boards
from ..errors import OtaError

_SSH_TIMEOUT = 60


class SshTarget:
    """A device root on another machine, driven one ssh command per step (so
    an interruption can only ever cut between or inside single steps, each of
    which is safe to cut; see edgerun.ota)."""

    def __init__(self, url, identity=None, options=()):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "ssh" or not u.hostname or not u.path or u.path == "/":
            raise OtaError(f"{url}: expected ssh://[user@]host[:port]/path/to/device/root")
        self.host = u.hostname
        self.user = u.username
        try:
            self.port = u.port or 22
        except ValueError:
            raise OtaError(f"{url}: the port is not a number") from None
        self.rootdir = urllib.parse.unquote(u.path).rstrip("/") or "/"
        self.name = url
        self.base = ["ssh", "-p", str(self.port), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
        self.mux = os.environ.get("EDGERUN_SSH_MUX", "1") != "0"
        if self.mux:
            # One flash is some twenty short ssh commands; over one shared
            # connection (started by prepare(), lingering 15 s after the last
            # use) each costs milliseconds instead of a key exchange. The
            # commands only use the master, never become one: a master forked
            # by a command whose output we capture would hold our pipes open.
            self.base += ["-o", "ControlMaster=no", "-o", f"ControlPath={tempfile.gettempdir()}/edgerun-ssh-%C"]
        if identity:
            self.base += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
        for o in options:
            self.base += ["-o", o]
        self.base.append(f"{self.user}@{self.host}" if self.user else self.host)

    def p(self, rel):
        return shlex.quote(f"{self.rootdir}/{rel}")

    def abspath(self, rel):
        return f"{self.rootdir}/{rel}"

    def sh(self, script, stdin=None, timeout=_SSH_TIMEOUT, text=True):
        try:
            return subprocess.run(self.base + [script], input=stdin, capture_output=True, text=text,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise OtaError(f"{self.name}: the device did not answer within {timeout} s") from None

    def must(self, script, what, stdin=None):
        r = self.sh(script, stdin=stdin)
        if r.returncode == 255:
            raise OtaError(f"{self.name}: ssh failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        if r.returncode != 0:
            err = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
            if "No space left" in err:
                raise OSError(28, f"No space left on device ({what})")
            raise OtaError(f"{self.name}: {what} failed: {err}")
        return r

    def _pipe(self, script, src, what):
        """Runs `script` on the device with `src` (a binary reader) on its stdin."""
        proc = subprocess.Popen(self.base + [script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            for b in iter(lambda: src.read(1 << 20), b""):
                proc.stdin.write(b)
        except BrokenPipeError:
            pass            # the remote side gave up; its status and stderr say why
        try:
            out, err = proc.communicate(timeout=_SSH_TIMEOUT * 5)
        except BrokenPipeError:
            out, err = b"", proc.stderr.read()
            proc.wait()
        if proc.returncode != 0:
            msg = (err.decode("utf-8", "replace").strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            if "No space left" in msg:
                raise OSError(28, f"No space left on device ({what})")
            raise OtaError(f"{self.name}: {what} failed: {msg}")

    # ---- the Target interface (see edgerun.ota.LocalTarget)
    def prepare(self):
        if self.mux:
            master = [a if a != "ControlMaster=no" else "ControlMaster=auto" for a in self.base]
            master[1:1] = ["-o", "ControlPersist=15", "-N", "-f"]
            try:
                subprocess.run(master, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=_SSH_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass        # the commands below connect on their own and report the problem
        r = self.sh(f"test -d {shlex.quote(self.rootdir)} && command -v sha256sum >/dev/null && "
                    "command -v tar >/dev/null")
        if r.returncode == 255:
            raise OtaError(f"{self.name}: cannot connect: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        if r.returncode != 0:
            raise OtaError(f"{self.name}: the device root {self.rootdir} does not exist, or the device "
                           "lacks sha256sum/tar")

    def read_bytes(self, rel):
        r = self.sh(f"test -f {self.p(rel)} || exit 3; cat {self.p(rel)}", text=False)
        if r.returncode == 3:
            return None
        if r.returncode != 0:
            raise OtaError(f"{self.name}: reading {rel} failed: {r.stderr.decode(errors='replace').strip()}")
        return r.stdout

    def readlink(self, rel):
        r = self.sh(f"readlink {self.p(rel)}")
        if r.returncode != 0:
            return None
        return r.stdout.strip() or None

    def is_dir(self, rel):
        return self.sh(f"test -d {self.p(rel)} && ! test -L {self.p(rel)}").returncode == 0

    def rmtree(self, rel):
        self.must(f"rm -rf -- {self.p(rel)}", f"removing {rel}")

    def write_file(self, rel, src, mode=0o644):
        d = rel.rsplit("/", 1)[0] if "/" in rel else "."
        tmp = self.p(rel + ".tmp")
        self._pipe(f"mkdir -p {self.p(d)} && cat > {tmp} && chmod {mode:o} {tmp} && sync {tmp} && "
                   f"mv -f {tmp} {self.p(rel)}", src, f"writing {rel}")

    def extract_tar(self, rel_dir, src):
        d = self.p(rel_dir)
        self._pipe(f"mkdir -p {d} && tar -xzf - -C {d} --no-same-owner && "
                   f"find {d} -type f -exec sync -- {{}} + && sync -- {d}", src, f"unpacking into {rel_dir}")

    def rename(self, src, dst):
        self.must(f"mv -T {self.p(src)} {self.p(dst)} && sync -- {self.p('.')}", f"renaming {src} to {dst}")

    def replace_symlink(self, link, target):
        tmp = self.p(f".{link}.tmp")
        self.must(f"ln -sfn {shlex.quote(target)} {tmp} && mv -Tf {tmp} {self.p(link)} && sync -- {self.p('.')}",
                  f"switching {link} to {target}")

    def append_line(self, rel, line):
        self.must(f"printf '%s\\n' {shlex.quote(line)} >> {self.p(rel)} && sync -- {self.p(rel)}",
                  f"appending to {rel}")

    def sha256(self, rels):
        rels = list(rels)
        out = {r: None for r in rels}
        if not rels:
            return out
        r = self.sh(f"cd {shlex.quote(self.rootdir)} && sha256sum -- " + " ".join(shlex.quote(x) for x in rels)
                    + " 2>/dev/null", timeout=_SSH_TIMEOUT * 5)
        for line in r.stdout.splitlines():
            h, _, name = line.partition("  ")
            if name in out:
                out[name] = h
        return out

    def free_bytes(self):
        r = self.sh(f"df -Pk {shlex.quote(self.rootdir)} | tail -n 1")
        try:
            return int(r.stdout.split()[3]) * 1024
        except (IndexError, ValueError):
            return None

    def run(self, argv, timeout):
        r = subprocess.run(self.base + [" ".join(shlex.quote(str(a)) for a in argv)], capture_output=True,
                           text=True, timeout=timeout)
        if r.returncode == 255 and not r.stdout:
            raise OtaError(f"{self.name}: ssh failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        return r


def open_target(spec, board, identity=None, ssh_options=()):
    """A Target for `--target`: ssh://... or a folder of this machine."""
    board = boards.load(board)
    if str(spec).startswith("ssh://"):
        return SshTarget(str(spec), identity, ssh_options)
    if "://" in str(spec):
        raise OtaError(f"{spec}: unsupported target; use a folder or ssh://user@host:port/path")
    runner = None
    if not board.is_native:
        from ..boards import qemu

        def runner(argv, timeout):
            return qemu.run(board, board.qemu_cpus[0], argv, timeout=timeout)
    return ota.LocalTarget(spec, runner)


def flash(bundle, board, target, cert, no_downgrade=False, identity=None, ssh_options=(), progress=None):
    """Verifies `bundle` for `board` and installs it on `target` (see
    edgerun.ota.install); returns the activation event."""
    board = boards.load(board)
    tgt = target if hasattr(target, "read_bytes") else open_target(target, board, identity, ssh_options)
    tgt.prepare()
    min_version = None
    active = ota.active_slot(tgt)
    if no_downgrade and active:
        m = ota._read_manifest(tgt, active)
        min_version = m.get("version") if m else None
    with ota.verify(bundle, cert, hardware=board.ota["hardware"], revision=str(board.ota["revision"]),
                    min_version=min_version) as b:
        if b.manifest.get("board") != board.name:
            # same OTA hardware name, different build (e.g. another -mcpu): refuse
            raise OtaError(f"{b.path.name} was built for board {b.manifest.get('board')}, not {board.name}")
        return ota.install(b, tgt, progress=progress)


def flash_from(url, board, target, cert, version=None, no_downgrade=False, identity=None, ssh_options=(),
               progress=None, ca=None):
    """Pulls the release for `board` from the update server at `url` (its
    root or its index.json; see edgerun.ota.publish), checks the index's size
    and sha256, then flashes it like a local bundle (signature, board, A/B,
    health check). Nothing is written to the device before both checks pass.
    `ca`: the CA file an https server must be signed by (default: the
    system's trusted CAs, or SSL_CERT_FILE)."""
    from . import publish
    b = boards.load(board)
    if "://" not in str(url):
        # a folder: the web root `edgerun release --to DIR` wrote (a mounted share, a test)
        url = pathlib.Path(url).resolve().as_uri() + ("/" if pathlib.Path(url).is_dir() else "")
    index, iu = publish.fetch_index(url, ca)
    rel = publish.pick(index, b, version)
    burl = urllib.parse.urljoin(iu, rel["path"])
    if progress:
        progress(f"downloading {rel['version']} from {burl}")
    with tempfile.TemporaryDirectory(prefix="edgerun-pull-") as td:
        dest = publish.download(burl, pathlib.Path(td) / pathlib.PurePosixPath(rel["path"]).name,
                                rel["sha256"], rel["bytes"], ca=ca)
        ev = flash(dest, b, target, cert, no_downgrade, identity, ssh_options, progress)
    return dict(ev, url=burl)


def rollback(board, target, identity=None, ssh_options=(), check=True):
    tgt = target if hasattr(target, "read_bytes") else open_target(target, board, identity, ssh_options)
    tgt.prepare()
    return ota.rollback(tgt, check=check)


def status(board, target, identity=None, ssh_options=()):
    tgt = target if hasattr(target, "read_bytes") else open_target(target, board, identity, ssh_options)
    tgt.prepare()
    return ota.report(tgt)
