"""`edgerun serve [MODEL]`: an OpenAI-compatible HTTP API (/v1/chat/completions,
/v1/completions, /v1/models, /health, /metrics) with N parallel slots."""
import pathlib

from .options import add_model_options, formatter, model_kwargs

EPILOG = """\
examples:
  edgerun serve                                    # the embedded model on 127.0.0.1:8080
  edgerun serve model.gguf --parallel 4 --ctx 2048
  edgerun serve model.gguf --host 0.0.0.0 --port 8000 --queue 32
  edgerun serve model.gguf --chat-template chat.jinja
  edgerun serve --config /opt/edgerun --host 0.0.0.0  # on a device: the active slot's model

  curl http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' \\
       -d '{"model": "edgerun-add", "prompt": "0012+0034=", "max_tokens": 8, "temperature": 0}'

  from openai import OpenAI
  client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="none")
  client.chat.completions.create(model="MODEL", messages=[{"role": "user", "content": "Hi"}])

The model's arena is planned once at start for --parallel sessions (one KV
cache each); requests beyond the slots wait in a queue of --queue, and beyond
that get 429 with Retry-After. Each slot keeps the cache of its last request,
so a conversation's next turn prefills only its new messages. Ctrl-C stops.
"""


def register(sub):
    p = sub.add_parser("serve", help="OpenAI-compatible HTTP API", description=__doc__, epilog=EPILOG,
                       formatter_class=formatter())
    p.add_argument("model", nargs="?", default=None, metavar="MODEL",
                   help="GGUF file (default: the embedded model)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080,
                   help="TCP port (default 8080; 0: a free one, which the first line printed gives)")
    p.add_argument("--parallel", "-np", type=int, default=1, metavar="N",
                   help="slots: requests generating at once, each with its own KV cache (default 1)")
    p.add_argument("--queue", type=int, default=16, metavar="N",
                   help="requests that may wait for a slot; more get 429 (default 16)")
    p.add_argument("--prefill-chunk", type=int, default=64, metavar="N",
                   help="the most prompt tokens prefilled per scheduler step (default 64)")
    p.add_argument("--prefill-share", type=float, default=0.5, metavar="F",
                   help="while other slots generate, a step's prompt chunk takes at most F x the time of their "
                        "decode tokens, so a long prompt raises their per-token latency by about F at most "
                        "(default 0.5)")
    p.add_argument("--chat-template", metavar="FILE", default=None,
                   help="Jinja chat template (default: the model file's tokenizer.chat_template)")
    p.add_argument("--model-id", default=None, metavar="NAME",
                   help="the model's name in the API (default: the file name without .gguf)")
    p.add_argument("--max-body", type=int, default=1 << 20, metavar="BYTES",
                   help="largest request body accepted (default 1 MiB)")
    p.add_argument("--config", metavar="YAML|ROOT", default=None,
                   help="on a device: serve the model that edgerun.yaml names, with its threads, pinning, context "
                        "and arena budget; a device root folder (/opt/edgerun) means its active, health-checked "
                        "slot's edgerun.yaml (ROOT/current/edgerun.yaml)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    add_model_options(p)
    p.set_defaults(func=main)


def main(args):
    from ..model import Model
    from ..serve import Server
    from ..serve.server import listen
    if not 0 < args.prefill_share <= 100:
        raise ValueError(f"--prefill-share must be in (0, 100], got {args.prefill_share}")
    for name in ("parallel", "port", "queue", "prefill_chunk", "max_body"):
        v = getattr(args, name)
        lo = 0 if name in ("port", "queue") else 1
        if v < lo or (name == "port" and v > 65535):
            raise ValueError(f"--{name.replace('_', '-')} must be {'in [0, 65535]' if name == 'port' else f'>= {lo}'}, "
                             f"got {v}")
    if args.config is not None and args.model is not None:
        raise ValueError("with --config the model is the one edgerun.yaml names (model.path); drop MODEL")
    template = None
    if args.chat_template is not None:
        template = pathlib.Path(args.chat_template).read_text(encoding="utf-8")
    # Bound before the model loads: a busy port fails at once rather than
    # after seconds of loading, and the banner can give the port that --port 0
    # got. A client that connects meanwhile waits until the server runs.
    sockets = listen(args.host, args.port)
    try:
        if args.config is not None:
            from ..serve.device import open_model
            opened, _cfg = open_model(args.config, args.parallel)
        else:
            opened = Model(args.model, n_sessions=args.parallel, **model_kwargs(args))
        with opened as m:
            server = Server(m, parallel=args.parallel, queue_size=args.queue, prefill_chunk=args.prefill_chunk,
                            prefill_share=args.prefill_share,
                            model_id=args.model_id, chat_template=template, max_body=args.max_body)
            port = sockets[0].getsockname()[1]
            host = f"[{args.host}]" if ":" in args.host else args.host
            print(f"edgerun serve: {m.path.name} as {server.app.state.service.model_id!r}, {args.parallel} slot(s) "
                  f"of {m.n_ctx} tokens, on http://{host}:{port}/v1", flush=True)
            server.run(host=args.host, port=port, log_level=args.log_level, sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
    return 0
