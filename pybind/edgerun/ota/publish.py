"""Publishing a signed bundle on an update server, and reading it back.

The layout is plain files, so any HTTP server serves it (devices fetch with
`swupdate -d -u URL` or `edgerun flash --from URL`):

    <root>/index.json                               every release, newest last
    <root>/<board>/<version>/edgerun-<board>-<version>.swu

index.json:

    {"format": "edgerun-releases/1",
     "releases": [{"board": "rpi5", "version": "1.1.0", "hardware": "raspberrypi5",
                   "revision": "1.0", "path": "rpi5/1.1.0/edgerun-rpi5-1.1.0.swu",
                   "sha256": "...", "bytes": 12345, "date": "2026-12-02T08:00:00+00:00"}, ...]}

A release is immutable: publishing the same board and version again with other
bytes is refused (a device that already checked the old sha256 would get a
different bundle under the same name); the same bytes again change nothing.
Earlier releases stay, so devices can still roll back to them.

Targets (`--to`):
  DIR or file:///DIR   the web root of the update server on this machine. The
                       bundle is written beside its final name and renamed in,
                       then index.json is replaced with one rename, under a lock
                       file, so a device never reads a half-written file.
  http(s)://host/path  a WebDAV server (nginx dav_methods, lighttpd mod_webdav,
                       Apache mod_dav): MKCOL the folders, PUT the bundle, PUT
                       the new index under a temporary name and MOVE it over
                       index.json (a rename on the server: atomic for readers),
                       all under a lock collection on the server (dav_lock.py)
                       so concurrent publishers do not lose each other's entry.
"""
import base64
import contextlib
import datetime
import fcntl
import functools
import hashlib
import http.client
import json
import os
import pathlib
import shutil
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from ..errors import OtaError
from . import dav_lock
from .package import check_version, version_key

INDEX = "index.json"
FORMAT = "edgerun-releases/1"
_TIMEOUT = 60


def bundle_relpath(board, version):
    return f"{board}/{version}/edgerun-{board}-{version}.swu"


def empty_index():
    return {"format": FORMAT, "releases": []}


def parse_index(data, source=INDEX):
    """The index as a dict, checked: a file we do not understand is refused."""
    try:
        idx = json.loads(data)
    except ValueError as e:
        raise OtaError(f"{source}: not valid JSON ({e})") from None
    if not isinstance(idx, dict) or idx.get("format") != FORMAT or not isinstance(idx.get("releases"), list):
        raise OtaError(f"{source}: not an edgerun release index (expected format {FORMAT!r})")
    for i, r in enumerate(idx["releases"]):
        need = ("board", "version", "hardware", "revision", "path", "sha256", "bytes", "date")
        if not isinstance(r, dict) or any(k not in r for k in need):
            raise OtaError(f"{source}: releases[{i}]: expected the fields {', '.join(need)}")
        p = r["path"]
        if not isinstance(p, str) or p.startswith("/") or ".." in p.split("/") or "://" in p:
            raise OtaError(f"{source}: releases[{i}].path: expected a relative path, got {p!r}")
        if not isinstance(r["sha256"], str) or len(r["sha256"]) != 64:
            raise OtaError(f"{source}: releases[{i}].sha256: expected 64 hex digits")
    return idx


def entry_for(manifest, sha256, nbytes, date=None):
    return {"board": manifest["board"], "version": manifest["version"], "hardware": manifest["hardware"],
            "revision": str(manifest["revision"]), "path": bundle_relpath(manifest["board"], manifest["version"]),
            "sha256": sha256, "bytes": nbytes,
            "date": date or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def merge(index, entry):
    """The index with `entry` added (sorted by board, then version). Returns
    (new index, added): added is False when the same release is already there."""
    rels = list(index["releases"])
    for r in rels:
        if r["board"] == entry["board"] and r["version"] == entry["version"]:
            if r["sha256"] != entry["sha256"]:
                raise OtaError(f"release {entry['version']} for board {entry['board']} is already published "
                               f"with other contents (sha256 {r['sha256'][:12]}...); releases are immutable, "
                               "publish a new version")
            return index, False
    rels.append(entry)
    rels.sort(key=lambda r: (r["board"], version_key(r["version"])))
    return dict(index, releases=rels), True


def pick(index, board, version=None):
    """The release for `board` (an edgerun.boards.Board): the given version, or
    the newest one. Matches on the board name and its OTA hardware:revision."""
    mine = [r for r in index["releases"] if r["board"] == board.name]
    if not mine:
        have = sorted({r["board"] for r in index["releases"]})
        raise OtaError(f"the update server has no release for board {board.name} "
                       f"(it has: {', '.join(have) or 'none'})")
    if version is not None:
        mine = [r for r in mine if r["version"] == version]
        if not mine:
            raise OtaError(f"the update server has no release {version} for board {board.name}")
    r = max(mine, key=lambda r: version_key(r["version"]))
    if r["hardware"] != board.ota["hardware"] or r["revision"] != str(board.ota["revision"]):
        raise OtaError(f"release {r['version']} is for hardware {r['hardware']}:{r['revision']}, board "
                       f"{board.name} is {board.ota['hardware']}:{board.ota['revision']}")
    return r


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# ------------------------------------------------------------------ publishing

def publish(bundle, manifest, to, log=None, lock_timeout_s=None, lock_stale_s=None, ca=None):
    """Publishes `bundle` (its verified manifest given) to `to` (a folder,
    file:// or http(s):// URL). Returns {"to", "url", "entry", "added", "index"}.
    For a URL, lock_timeout_s / lock_stale_s tune the server's publish lock
    (edgerun.ota.dav_lock) and `ca` is the CA file an https server is checked
    against (default: the system's)."""
    check_version(manifest["version"])
    sha, n = sha256_file(bundle), pathlib.Path(bundle).stat().st_size
    entry = entry_for(manifest, sha, n)
    to = str(to)
    scheme = urllib.parse.urlsplit(to).scheme
    if scheme in ("http", "https"):
        return _publish_http(bundle, entry, to, log, lock_timeout_s, lock_stale_s, ca)
    if scheme == "file":
        to = urllib.parse.unquote(urllib.parse.urlsplit(to).path)
    elif "://" in to:
        raise OtaError(f"{to}: unsupported publish target; use a folder, file:///path or http(s)://host/path")
    return _publish_dir(bundle, entry, pathlib.Path(to), log)


def _atomic_write(path, write):
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _publish_dir(bundle, entry, root, log):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".index.lock", "w") as lock:
        # Two releases at once (two boards of one tag) each read, merge and
        # write the index; without the lock one of them would be lost.
        fcntl.flock(lock, fcntl.LOCK_EX)
        ip = root / INDEX
        index = parse_index(ip.read_text(), str(ip)) if ip.exists() else empty_index()
        new, added = merge(index, entry)
        dst = root / entry["path"]
        if added:
            dst.parent.mkdir(parents=True, exist_ok=True)
            with open(bundle, "rb") as src:
                _atomic_write(dst, lambda f: shutil.copyfileobj(src, f, 1 << 20))
            _atomic_write(ip, lambda f: f.write((json.dumps(new, indent=1) + "\n").encode()))
            if log:
                print(f"published {dst} and {ip}", file=log)
        elif log:
            print(f"{dst}: already published with the same contents", file=log)
    return {"to": str(root), "url": dst.as_uri(), "entry": entry, "added": added, "index": str(ip)}


def ssl_context(ca=None):
    """The TLS settings for an https server: `ca` (a PEM file) as the only
    trusted authority when given (an update server with its own CA), else the
    system's store (SSL_CERT_FILE / SSL_CERT_DIR override it, as OpenSSL reads
    them)."""
    if ca is None:
        return None
    if not pathlib.Path(ca).is_file():
        raise FileNotFoundError(2, "No such file or directory", str(ca))
    return ssl.create_default_context(cafile=str(ca))


def _urlopen(req, context):
    try:
        return urllib.request.urlopen(req, timeout=_TIMEOUT, context=context)
    except urllib.error.URLError as e:
        if isinstance(e.reason, ssl.SSLCertVerificationError):
            url = req.full_url if hasattr(req, "full_url") else req
            raise OtaError(f"{url}: the server's certificate does not verify ({e.reason.verify_message}); "
                           "give its CA with --ca FILE (or SSL_CERT_FILE)") from None
        raise


def _request(method, url, data=None, headers=None, auth=None, context=None):
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with _urlopen(req, context) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers
    except (urllib.error.URLError, OSError) as e:
        raise OtaError(f"{method} {url}: {getattr(e, 'reason', e)}") from None


def _publish_http(bundle, entry, to, log, lock_timeout_s=None, lock_stale_s=None, ca=None):
    u = urllib.parse.urlsplit(to)
    # user:password in the URL, or EDGERUN_PUBLISH_AUTH (from the CI's secrets)
    auth = os.environ.get("EDGERUN_PUBLISH_AUTH")
    if u.username:
        auth = f"{urllib.parse.unquote(u.username)}:{urllib.parse.unquote(u.password or '')}"
        u = u._replace(netloc=u.hostname + (f":{u.port}" if u.port else ""))
    base = urllib.parse.urlunsplit(u).rstrip("/") + "/"
    req = functools.partial(_request, auth=auth, context=ssl_context(ca))
    st, _, _ = req("MKCOL", base)
    if st not in (201, 405):                   # 405: the collection exists
        raise OtaError(f"MKCOL {base}: HTTP {st} (is WebDAV enabled on the server?)")
    with dav_lock.held(req, base, timeout_s=lock_timeout_s, stale_s=lock_stale_s, log=log):
        added = _publish_http_locked(bundle, entry, base, req, log)
    return {"to": to, "url": base + entry["path"], "entry": entry, "added": added, "index": base + INDEX}


def _publish_http_locked(bundle, entry, base, req, log):
    """Read, merge and replace the index (the caller holds the server's
    publish lock, so no other publisher's entry is lost in between)."""
    st, body, _ = req("GET", base + INDEX)
    if st == 404:
        index = empty_index()
    elif st == 200:
        index = parse_index(body, base + INDEX)
    else:
        raise OtaError(f"GET {base + INDEX}: HTTP {st}")
    new, added = merge(index, entry)
    url = base + entry["path"]
    if not added:
        if log:
            print(f"{url}: already published with the same contents", file=log)
        return False
    parts = entry["path"].split("/")[:-1]
    for d in [base + "/".join(parts[:i]) + "/" for i in range(1, len(parts) + 1)]:
        st, _, _ = req("MKCOL", d)
        if st not in (201, 405):
            raise OtaError(f"MKCOL {d}: HTTP {st} (is WebDAV enabled on the server?)")
    with open(bundle, "rb") as f:
        data = f.read()
    st, _, _ = req("PUT", url, data=data, headers={"Content-Type": "application/octet-stream"})
    if st not in (200, 201, 204):
        raise OtaError(f"PUT {url}: HTTP {st}")
    # Read back what the server stores before the index points at it.
    st, got, _ = req("GET", url)
    if st != 200 or hashlib.sha256(got).hexdigest() != entry["sha256"]:
        raise OtaError(f"{url}: the server does not return the bytes just uploaded (HTTP {st})")
    tmp = base + f".{INDEX}.{uuid.uuid4().hex[:8]}.tmp"
    st, _, _ = req("PUT", tmp, data=(json.dumps(new, indent=1) + "\n").encode(),
                   headers={"Content-Type": "application/json"})
    if st not in (200, 201, 204):
        raise OtaError(f"PUT {tmp}: HTTP {st}")
    st, _, _ = req("MOVE", tmp, headers={"Destination": base + INDEX, "Overwrite": "T"})
    if st not in (201, 204):
        req("DELETE", tmp)
        raise OtaError(f"MOVE {tmp} -> {base + INDEX}: HTTP {st}")
    if log:
        print(f"published {url} and {base + INDEX}", file=log)
    return True


# ------------------------------------------------------------------ fetching

def index_url(url):
    """The index of an update server given its root URL or the index's own URL."""
    return url if url.endswith(".json") else url.rstrip("/") + "/" + INDEX


def fetch_index(url, ca=None):
    iu = index_url(url)
    try:
        with _urlopen(iu, ssl_context(ca)) as r:
            return parse_index(r.read(), iu), iu
    except urllib.error.HTTPError as e:
        raise OtaError(f"{iu}: HTTP {e.code}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise OtaError(f"{iu}: {getattr(e, 'reason', e)}") from None


def download(url, dest, sha256, nbytes, retries=3, ca=None):
    """Downloads `url` to `dest`, resuming with a Range request after a broken
    transfer (up to `retries` more times; a partial file left by an earlier
    call is resumed too), and checks the size and the sha256 the index gives
    before returning. A complete file that does not match is removed and refused."""
    dest = pathlib.Path(dest)
    context = ssl_context(ca)
    tries, why = 0, None
    while True:
        have = dest.stat().st_size if dest.exists() else 0
        if have > nbytes:
            dest.unlink()
            have = 0
        if have < nbytes:
            req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
            try:
                with _urlopen(req, context) as r:
                    # 200 to a Range request: the server sends it all again
                    with open(dest, "ab" if have and r.status == 206 else "wb") as f:
                        for b in iter(lambda: r.read(1 << 16), b""):
                            f.write(b)
            except urllib.error.HTTPError as e:
                if e.code != 416:
                    raise OtaError(f"{url}: HTTP {e.code}") from None
            except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
                why = getattr(e, "reason", None) or e
        size = dest.stat().st_size if dest.exists() else 0
        if size >= nbytes:
            break
        tries += 1
        if tries > retries:
            raise OtaError(f"{url}: the download broke off at {size} of {nbytes} bytes"
                           f"{f' ({why})' if why else ''}; run again to resume it. Nothing was written to the device")
        time.sleep(min(0.2 * tries, 2.0))
    got = sha256_file(dest)
    if size != nbytes or got != sha256:
        dest.unlink()
        raise OtaError(f"{url}: the downloaded bundle does not match the index ({size} bytes, sha256 "
                       f"{got[:12]}...; the index says {nbytes} bytes, {sha256[:12]}...); nothing was written "
                       "to the device")
    return dest
