"""`edgerun serve`: an OpenAI-compatible HTTP API over one opened model.

    from edgerun.serve import Server
    with edgerun.Model("model.gguf", n_sessions=4) as m:
        Server(m, parallel=4).run(host="127.0.0.1", port=8080)

Layout, one job per module:
  app.py        the ASGI application (starlette): endpoints, body limits, SSE
  params.py     request bodies checked field by field -> a Job for the scheduler
  scheduler.py  the one thread that owns the model: admits jobs into slots,
                steps them (prefill in chunks, decode one token), samples
  slots.py      a slot: one runtime session and the ids its KV cache holds
  text.py       token ids -> text pieces, cut at stop strings
  metrics.py    counters, gauges and histograms in Prometheus text
  errors.py     OpenAI-style error bodies
  server.py     uvicorn around the app (run forever, or in a thread for tests)
  device.py     on a device: the model of the active slot's edgerun.yaml
  binding.py    the names serve takes from the runtime binding, in one place

The runtime never imports this package; this package imports the runtime
binding (through binding.py) and edgerun.chat (templates).
"""
from .app import create_app
from .scheduler import QueueFull, Scheduler
from .server import Server

__all__ = ["create_app", "Scheduler", "QueueFull", "Server"]
