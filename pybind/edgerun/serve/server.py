"""uvicorn around the app: Server(model, ...).run(host, port) serves until
SIGINT/SIGTERM; start_in_thread() serves from a background thread (tests,
embedding in another program) and stop() ends it. listen() binds the
sockets either serves from."""
import errno
import socket
import threading
import time

from .app import MAX_BODY, create_app
from .metrics import Metrics
from .scheduler import Scheduler


def _uvicorn():
    try:
        import uvicorn
    except ImportError:
        from .binding import errors
        raise errors.UnsupportedError(
            "`edgerun serve` needs starlette and uvicorn; install them with `pip install 'edgerun[serve]'` "
            "(or `pip install starlette uvicorn`)", -4) from None
    return uvicorn


def _where(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bind_error(exc, host, port):
    where = _where(host or "0.0.0.0", port)
    if exc.errno == errno.EADDRINUSE:
        return f"{where} is already in use; pick another --port (or stop the other server)"
    if exc.errno == errno.EACCES:
        return (f"{where}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE); "
                f"pick a --port of 1024 or more")
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"--host {host}: no network interface of this machine has that address; pass one it has "
                f"(127.0.0.1 for this machine only, 0.0.0.0 for all)")
    return f"cannot listen on {where}: {exc.strerror or exc}; pick another --host or --port"


def listen(host="127.0.0.1", port=8080):
    """The sockets to serve host:port from, one per address the host resolves
    to (localhost may be both 127.0.0.1 and ::1), bound and listening; the
    connections that arrive before the server runs wait to be accepted.

    Binding here rather than inside uvicorn turns a busy port or a bad host
    into an OSError whose text is one line for the user (uvicorn logs it and
    calls sys.exit), and tells the real port when port is 0."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise OSError(f"--host {host}: {reason}; pass an IP address or a name this machine resolves") from None
    socks = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            if socks:
                # With port 0 every address would get a port of its own; one
                # port for all is what a user can be told.
                addr = (addr[0], socks[0].getsockname()[1], *addr[2:])
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            # As uvicorn and asyncio do: a restart may reuse the port while
            # the last run's connections linger in TIME_WAIT.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # "::" would otherwise claim the IPv4 port too and collide
                # with the 0.0.0.0 socket.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
                # Listening from here on: a client that read the banner and
                # connects before uvicorn takes the socket over waits in the
                # backlog instead of being refused (uvicorn's own backlog).
                sock.listen(2048)
            except OSError as e:
                raise OSError(_bind_error(e, host, addr[1])) from e
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


class Server:
    """The HTTP server over an opened model (opened with n_sessions >= parallel).

    parallel: slots (requests generating at once); queue_size: requests that
    may wait for a slot before new ones get 429; prefill_chunk: the most
    prompt tokens per scheduler step; prefill_share: while other slots
    generate, a step's prompt chunk takes at most this share of the time of
    their decode tokens (smaller: fairer to running requests, larger: faster
    long prompts); max_body: bytes of a request body."""

    def __init__(self, model, parallel=1, queue_size=16, prefill_chunk=64, prefill_share=0.5, model_id=None,
                 chat_template=None, max_body=MAX_BODY):
        self.model = model
        self.metrics = Metrics()
        self.scheduler = Scheduler(model, parallel=parallel, queue_size=queue_size, prefill_chunk=prefill_chunk,
                                   prefill_share=prefill_share, metrics=self.metrics)
        try:
            self.app = create_app(model, self.scheduler, self.metrics, model_id=model_id,
                                  chat_template=chat_template, max_body=max_body)
        except BaseException:
            self.scheduler.close()
            raise
        self.parallel = parallel
        self.queue_size = queue_size
        self._uv = None
        self._thread = None

    def _config(self, host, port, log_level):
        uvicorn = _uvicorn()
        # Connections beyond this get 503 from uvicorn before any work: the
        # slots, the wait queue, and room for cheap requests (health, metrics)
        # and for the 429s themselves.
        limit = 4 * (self.parallel + self.queue_size) + 32
        # On SIGINT/SIGTERM, requests still generating get 5 s to finish; then
        # they are cancelled (their slots free) and the process exits.
        return uvicorn.Config(self.app, host=host, port=port, log_level=log_level, access_log=False,
                              limit_concurrency=limit, timeout_keep_alive=5, timeout_graceful_shutdown=5,
                              lifespan="off")

    def run(self, host="127.0.0.1", port=8080, log_level="info", sockets=None):
        """Serves until interrupted, then stops the scheduler. sockets: those
        listen(host, port) returned (bound first, so that the caller can
        report the port); else they are bound here."""
        uvicorn = _uvicorn()
        try:
            if sockets is None:
                sockets = listen(host, port)
            self._uv = uvicorn.Server(self._config(host, port, log_level))
            self._uv.run(sockets=sockets)
        finally:
            self.scheduler.close()

    def start_in_thread(self, host="127.0.0.1", port=0, log_level="warning", timeout=30.0):
        """Serves from a daemon thread; returns the port once it accepts
        connections (port=0: a free one)."""
        uvicorn = _uvicorn()
        try:
            sockets = listen(host, port)
        except BaseException:
            self.scheduler.close()
            raise
        self._uv = uvicorn.Server(self._config(host, port, log_level))
        self._thread = threading.Thread(target=self._uv.run, kwargs={"sockets": sockets}, name="edgerun-serve-http",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uv.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.scheduler.close()
                raise RuntimeError(f"the server did not start on {host}:{port}")
            time.sleep(0.01)
        return sockets[0].getsockname()[1]

    def stop(self):
        if self._uv is not None:
            self._uv.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.scheduler.close()
