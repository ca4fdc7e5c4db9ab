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


class _Server:
    """A real web server from Debian on 127.0.0.1, run in the foreground from
    its own config in `workdir` and killed by stop() (SIGKILL: mid-transfer,
    as on a power cut). Subclasses give NAME, config() and argv(cfg)."""
    NAME = ""
    CONFIG = ""

    def start(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / self.CONFIG
        cfg.write_text(self.config())
        self.proc = subprocess.Popen(self.argv(cfg), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.workdir / "error.log"
                raise RuntimeError(f"{self.NAME} exited: {self.proc.stdout.read().decode(errors='replace')}"
                                   f"{log.read_text() if log.exists() else ''}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.NAME} did not start listening within 10 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Lighttpd(_Server):
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

    NAME, CONFIG = "lighttpd", "lighttpd.conf"

    def argv(self, cfg):
        return [LIGHTTPD, "-D", "-f", str(cfg)]


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


# ------------------------------------------------------------------ https: nginx and a test CA

NGINX = shutil.which("nginx") or (os.path.exists("/usr/sbin/nginx") and "/usr/sbin/nginx") or None


def make_tls(d, name="127.0.0.1"):
    """A CA and a server certificate it signed for 127.0.0.1 and localhost,
    made with openssl in `d`. Returns (ca.pem, server.pem, server-key.pem)."""
    d = pathlib.Path(d)
    d.mkdir(parents=True, exist_ok=True)

    def ossl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
         "-subj", f"/CN=edgerun test CA {d.name}", "-keyout", "ca-key.pem", "-out", "ca.pem",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
         "-keyout", "server-key.pem", "-out", "server.csr")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
                               "basicConstraints=CA:FALSE\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
         "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")
    return d / "ca.pem", d / "server.pem", d / "server-key.pem"


class Nginx(_Server):
    """nginx (Debian's) serving `root` over https on 127.0.0.1 with the given
    certificate; `webdav` enables PUT/DELETE/MKCOL/MOVE (ngx_http_dav_module).
    Its own prefix, config and logs in `workdir`; started and stopped here."""

    def __init__(self, root, workdir, cert, key, webdav=False, port=None):
        self.root, self.workdir = pathlib.Path(root), pathlib.Path(workdir)
        self.cert, self.key, self.webdav = cert, key, webdav
        self.port = port or free_port()
        self.proc = None

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}/"

    def config(self):
        dav = ("dav_methods PUT DELETE MKCOL COPY MOVE; create_full_put_path on; dav_access user:rw group:r all:r;"
               if self.webdav else "")
        return f"""daemon off;
master_process off;
worker_processes 1;
{"user root;" if os.geteuid() == 0 else ""}
pid {self.workdir}/nginx.pid;
error_log {self.workdir}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    default_type application/octet-stream;
    types {{ application/json json; }}
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:{self.port} ssl;
        ssl_certificate {self.cert};
        ssl_certificate_key {self.key};
        root {self.root};
        location / {{ {dav} }}
    }}
}}
"""

    NAME, CONFIG = "nginx", "nginx.conf"

    def argv(self, cfg):
        return [NGINX, "-p", f"{self.workdir}/", "-c", str(cfg), "-e", str(self.workdir / "error.log")]
