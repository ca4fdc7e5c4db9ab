"""uvicorn around the app: Server(model, ...).run(host, port) serves until
SIGINT/SIGTERM; start_in_thread() serves from a background thread (tests,
embedding in another program) and stop() ends it."""
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

    def run(self, host="127.0.0.1", port=8080, log_level="info"):
        """Serves until interrupted, then stops the scheduler."""
        uvicorn = _uvicorn()
        self._uv = uvicorn.Server(self._config(host, port, log_level))
        try:
            self._uv.run()
        finally:
            self.scheduler.close()

    def start_in_thread(self, host="127.0.0.1", port=0, log_level="warning", timeout=30.0):
        """Serves from a daemon thread; returns the port once it accepts
        connections (port=0: a free one)."""
        uvicorn = _uvicorn()
        self._uv = uvicorn.Server(self._config(host, port, log_level))
        self._thread = threading.Thread(target=self._uv.run, name="edgerun-serve-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uv.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.scheduler.close()
                raise RuntimeError(f"the server did not start on {host}:{port}")
            time.sleep(0.01)
        sock = self._uv.servers[0].sockets[0]
        return sock.getsockname()[1]

    def stop(self):
        if self._uv is not None:
            self._uv.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.scheduler.close()
