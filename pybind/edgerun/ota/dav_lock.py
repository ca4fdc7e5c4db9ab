"""A lock for publishers sharing one WebDAV update server.

Two releases published at once (two boards of one tag, two pipelines) each
GET index.json, merge their entry and MOVE a new index over it; without a lock
the second MOVE drops the first one's entry. Plain WebDAV has one atomic
create-if-absent that every server implements: MKCOL of a collection answers
201 to exactly one caller and 405 (it exists) to the others. So the lock is
the collection `<base>.edgerun-publish.lock/`, and its `owner.json` says who
holds it (host, pid, time).

A publisher that dies holding the lock leaves it behind. It counts as stale
once owner.json is older than `stale_s` by the server's own clock (its Date
header minus the file's Last-Modified, so publishers' clocks do not matter);
a waiter then removes it and competes again. A lock with no owner.json yet
(its holder between MKCOL and PUT) is judged by how long this waiter has
seen it so. WebDAV's LOCK method is not used: lighttpd's mod_webdav grants
its locks only with its sqlite database, and a lock on a file does not cover
the read-merge-write of the index anyway.
"""
import contextlib
import email.utils
import json
import os
import socket
import time
import uuid

from ..errors import OtaError

LOCK_NAME = ".edgerun-publish.lock/"
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_STALE_S = 900.0


def _age_s(headers):
    """Seconds since the response's Last-Modified, by the server's Date."""
    try:
        now = email.utils.parsedate_to_datetime(headers["Date"])
        mod = email.utils.parsedate_to_datetime(headers["Last-Modified"])
    except (KeyError, TypeError, ValueError):
        return None
    return (now - mod).total_seconds()


@contextlib.contextmanager
def held(request, base, timeout_s=None, stale_s=None, poll_s=0.2, log=None):
    """Holds the publish lock of the server folder `base` (ending in /) for
    the block. `request(method, url, data=, headers=)` returns (status,
    body, headers), with the server's credentials and TLS settings bound.
    Raises OtaError after `timeout_s` of waiting."""
    timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    stale_s = DEFAULT_STALE_S if stale_s is None else stale_s
    lock, owner_url = base + LOCK_NAME, base + LOCK_NAME + "owner.json"
    token = uuid.uuid4().hex
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "token": token,
             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    t0 = time.monotonic()
    no_owner_since = None
    said = False
    while True:
        st, _, _ = request("MKCOL", lock)
        if st == 201:
            break
        if st != 405:
            raise OtaError(f"MKCOL {lock}: HTTP {st} (the publish lock; is WebDAV enabled on the server?)")
        st, body, headers = request("GET", owner_url)
        held_by, age = None, None
        if st == 200:
            no_owner_since = None
            with contextlib.suppress(ValueError):
                held_by = json.loads(body)
            age = _age_s(headers)
        elif st == 404:
            no_owner_since = no_owner_since or time.monotonic()
            age = time.monotonic() - no_owner_since
        if age is not None and age > stale_s:
            # Re-read just before removing, so a lock that changed hands since
            # is not the one removed (two waiters may both see it stale).
            st2, body2, _ = request("GET", owner_url)
            if st2 == st and body2 == body:
                if log:
                    print(f"publish: removing a stale lock {lock} ({age:.0f} s old, held by {held_by})", file=log)
                request("DELETE", lock)
                no_owner_since = None
                continue
        waited = time.monotonic() - t0
        if waited > timeout_s:
            who = (f"{held_by.get('host')} pid {held_by.get('pid')} since {held_by.get('time')}"
                   if isinstance(held_by, dict) else "an unknown publisher")
            raise OtaError(f"{lock}: another publish holds the lock ({who}) and did not release it within "
                           f"{timeout_s:g} s; if no publish is running, delete that collection")
        if log and not said:
            print(f"publish: waiting for the lock {lock}", file=log)
            said = True
        time.sleep(poll_s)
    put = False
    try:
        st, _, _ = request("PUT", owner_url, data=json.dumps(owner).encode(),
                           headers={"Content-Type": "application/json"})
        if st not in (200, 201, 204):
            raise OtaError(f"PUT {owner_url}: HTTP {st}")
        put = True
        yield owner
    finally:
        # Only our own lock is removed: if it was judged stale and taken over
        # while we ran (a publish slower than stale_s), the new holder keeps it.
        st, body, _ = request("GET", owner_url) if put else (None, b"", None)
        if not put or (st == 200 and token.encode() in body):
            request("DELETE", lock)
