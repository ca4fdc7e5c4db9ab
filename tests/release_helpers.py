"""Shared by the release tests: a real lighttpd from Debian serving an update
server's web root on 127.0.0.1 (its own config in a tmp dir, a free port,
started and stopped by the test), and swupdate's own downloader."""
import contextlib
import fcntl
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import ota_helpers as H

LIGHTTPD = shutil.which("lighttpd") or (os.path.exists("/usr/sbin/lighttpd") and "/usr/sbin/lighttpd") or None
MODULES = pathlib.Path("/usr/lib/lighttpd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_webdav():
    return (MODULES / "mod_webdav.so").is_file()


class Lighttpd:
    """lighttpd -D on `root`; `kbps` limits each connection (a slow link, to
    cut a transfer in the middle); `webdav` enables PUT/MKCOL/MOVE."""

    def __init__(self, root, workdir, kbps=None, webdav=False, port=None):
        self.root, self.workdir = pathlib.Path(root), pathlib.Path(workdir)
        self.kbps, self.webdav = kbps, webdav
        self.port = port or free_port()
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def config(self):
        mods = ['"mod_webdav"'] if self.webdav else []
        lines = [f'server.document-root = "{self.root}"',
                 'server.bind = "127.0.0.1"',
                 f"server.port = {self.port}",
                 f'server.errorlog = "{self.workdir}/error.log"',
                 f'server.upload-dirs = ( "{self.workdir}" )',
                 # files change under the running server (a release published
                 # into its web root): no cached sizes of the old ones
                 'server.stat-cache-engine = "disable"',
                 f"server.modules = ( {', '.join(mods)} )",
                 'mimetype.assign = ( ".json" => "application/json", "" => "application/octet-stream" )']
        if self.kbps:
            lines.append(f"connection.kbytes-per-second = {self.kbps}")
        if self.webdav:
            lines += ['webdav.activate = "enable"', 'webdav.is-readonly = "disable"',
                      'webdav.sqlite-db-name = ""']
        return "\n".join(lines) + "\n"

    def start(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "lighttpd.conf"
        cfg.write_text(self.config())
        self.proc = subprocess.Popen([LIGHTTPD, "-D", "-f", str(cfg)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lighttpd exited: {self.proc.stdout.read().decode(errors='replace')}"
                                   f"{(self.workdir / 'error.log').read_text() if (self.workdir / 'error.log').exists() else ''}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("lighttpd did not start listening within 10 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()          # SIGKILL: the server dies mid-transfer, as on a power cut
            self.proc.wait()
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def swupdate_download(url, cert, hw, *args, retries=1, timeout=120):
    """The real swupdate pulling `url` with its own downloader (-d). Returns
    (accepted, output). Not in a private network namespace (it must reach
    127.0.0.1 of this one), so runs are serialised with ota_helpers' lock."""
    with tempfile.TemporaryDirectory(prefix="edgerun-swupdate-") as tmp:
        env = dict(os.environ, TMPDIR=tmp)
        cmd = [H.SWUPDATE, "-k", str(cert), "-H", hw, *args, "-d", f"-u {url} -r {retries} -t 5"]
        lock = pathlib.Path(tempfile.gettempdir()) / "edgerun-swupdate.lock"
        with open(lock, "w") as lf:
            fcntl.flock(lf, fcntl.LOCK_EX)
            out = H._run_swupdate(cmd, env, timeout)
    ok = "SWUPDATE successful" in out and "SWUPDATE failed" not in out
    return ok, out
