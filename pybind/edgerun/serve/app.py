"""The ASGI application (starlette): OpenAI's /v1/completions,
/v1/chat/completions and /v1/models, plus /health and /metrics.

The event loop only parses, checks and relays: templates and tokenizing run
on starlette's thread pool (the tokenizer is thread-safe; a megabyte prompt
must not stall other clients), generation runs on the scheduler's thread, and
its events come back through call_soon_threadsafe into a per-request queue.

A client that goes away cancels its job: for a stream, starlette notices the
disconnect (it listens while streaming) and closes our generator, whose
`finally` cancels the job; for a plain request, a watcher task waits for the
disconnect message while the job runs.
"""
import asyncio
import json
import logging
import time
import uuid

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route

from . import params
from .binding import compile_template, errors, model_template, render, special_tokens
from .errors import APIError, bad_request, error_body
from .scheduler import Job, QueueFull

log = logging.getLogger("edgerun.serve")

MAX_BODY = 1 << 20                 # bytes; a request body larger than this is refused (413)
COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
RETRY_AFTER_S = 1
# Prompts up to this size (characters of JSON) are rendered and tokenized on
# the event loop: tens of microseconds, less than a hop to the thread pool.
# Larger ones go to the pool, so a megabyte prompt does not stall other clients.
INLINE_PROMPT_CHARS = 4096


class _Service:
    def __init__(self, model, scheduler, metrics, model_id, chat_template, max_body):
        self.model = model
        self.scheduler = scheduler
        self.metrics = metrics
        self.model_id = model_id
        self.max_body = max_body
        self.created = int(time.time())
        self.tokenizer = model.tokenizer
        self.n_ctx = model.n_ctx
        self.n_vocab = model.n_vocab
        # The template is fetched and compiled once: a broken one fails at
        # startup; a model without one serves completions, and chat requests
        # get the reason as a 400.
        if self.tokenizer is None:
            raise errors.UnsupportedError(
                f"{model.path.name} has no tokenizer, and the API is text in and out; use a GGUF file with "
                "tokenizer.ggml.* metadata", -4)
        self.template, self.template_error = None, None
        try:
            self.template = model_template(model, chat_template)
            compile_template(self.template)
            self.specials = special_tokens(model)
        except errors.ChatTemplateError as e:
            if chat_template is not None:
                raise
            self.template_error = str(e).replace("`edgerun chat MODEL --chat-template FILE`",
                                                 "`edgerun serve MODEL --chat-template FILE`")

    # ------------------------------------------------------------ helpers
    async def read_json(self, request):
        cl = request.headers.get("content-length")
        if cl is not None and cl.isdigit() and int(cl) > self.max_body:
            raise APIError(413, f"the request body is {cl} bytes; at most {self.max_body}", code="request_too_large")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body:
                raise APIError(413, f"the request body is over {self.max_body} bytes", code="request_too_large")
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as e:     # UnicodeDecodeError is a ValueError
            raise bad_request(f"the request body is not valid JSON: {e}", code="invalid_json") from None

    def check_model(self, name):
        if name not in (self.model_id, self.model.path.name):
            raise bad_request(f"the model {name!r} does not exist; this server has {self.model_id!r}",
                              param="model", code="model_not_found")

    def prompt_ids(self, kind, prompt):
        """Template + tokenizer -> ids (on the thread pool for a large prompt)."""
        if kind == "chat":
            if self.template is None:
                raise bad_request(self.template_error, param="messages", code="no_chat_template")
            try:
                text = render(self.template, prompt, add_generation_prompt=True, **self.specials)
            except errors.ChatTemplateError as e:
                raise bad_request(f"the chat template refused the messages: {e}", param="messages") from None
            return self.tokenizer.encode(text, add_special=False, parse_special=True)
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt, add_special=True)
        bad = [t for t in prompt if not 0 <= t < self.n_vocab]
        if bad:
            raise bad_request(f"token id {bad[0]} is out of range for a vocabulary of {self.n_vocab}", param="prompt")
        return list(prompt)

    def budget(self, kind, ids, asked):
        if not ids:
            raise bad_request("the prompt is empty after tokenizing", param="prompt")
        room = self.n_ctx - len(ids)
        if room < 1:
            raise bad_request(f"this model's context holds {self.n_ctx} tokens, and the prompt has {len(ids)}; "
                              "shorten it", param="messages" if kind == "chat" else "prompt",
                              code="context_length_exceeded")
        if asked is None:
            return room if kind == "chat" else min(COMPLETION_DEFAULT_MAX_TOKENS, room)
        if asked > room:
            raise bad_request(f"this model's context holds {self.n_ctx} tokens; the prompt has {len(ids)}, so "
                              f"max_tokens can be at most {room}, not {asked}", param="max_tokens",
                              code="context_length_exceeded")
        return asked

    # ------------------------------------------------------------ generation
    async def generate(self, request, kind):
        t0 = time.perf_counter()
        body = await self.read_json(request)
        gp, prompt = params.chat(body) if kind == "chat" else params.completion(body)
        self.check_model(gp.model)
        if len(json.dumps(prompt)) > INLINE_PROMPT_CHARS:
            ids = await run_in_threadpool(self.prompt_ids, kind, prompt)
        else:
            ids = self.prompt_ids(kind, prompt)
        max_tokens = self.budget(kind, ids, gp.max_tokens)

        loop = asyncio.get_running_loop()
        events = asyncio.Queue()

        def emit(ev):
            try:
                loop.call_soon_threadsafe(events.put_nowait, ev)
            except RuntimeError:         # the event loop is closed: the server is stopping
                job.cancel()

        job = Job(ids, max_tokens, gp.temperature, gp.top_p, gp.seed, gp.stop, emit, ignore_eos=gp.ignore_eos,
                  continuing=kind != "chat")
        try:
            self.scheduler.submit(job)
        except QueueFull as e:
            self.metrics.inc("rejected_total")
            raise APIError(429, f"the server is busy ({e}); retry in {RETRY_AFTER_S} s", type="rate_limit_error",
                           code="queue_full", headers={"Retry-After": str(RETRY_AFTER_S)}) from None
        except errors.StateError as e:
            raise APIError(503, str(e), type="server_error") from None
        rid = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        if gp.stream:
            return StreamingResponse(self.sse(kind, rid, job, events, gp, t0), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return await self.plain(request, kind, rid, job, events, t0)

    def _head(self, kind, rid, chunk=False):
        obj = "chat.completion" + (".chunk" if chunk else "") if kind == "chat" else "text_completion"
        return {"id": rid, "object": obj, "created": int(time.time()), "model": self.model_id,
                "system_fingerprint": None}

    async def plain(self, request, kind, rid, job, events, t0):
        async def watch():
            while True:
                msg = await request.receive()
                if msg["type"] == "http.disconnect":
                    self.scheduler.cancel(job)
                    return

        watcher = asyncio.create_task(watch())
        text = []
        try:
            while True:
                ev = await events.get()
                if ev[0] == "piece":
                    text.append(ev[1])
                elif ev[0] == "done":
                    _, reason, usage = ev
                    break
                else:
                    raise APIError(500, f"generation failed: {ev[1]}", type="server_error")
        finally:
            watcher.cancel()
            if job.finish_reason is None:
                self.scheduler.cancel(job)
        self.metrics.observe("request_duration_seconds", time.perf_counter() - t0)
        out = self._head(kind, rid)
        if kind == "chat":
            out["choices"] = [{"index": 0, "message": {"role": "assistant", "content": "".join(text)},
                               "finish_reason": reason, "logprobs": None}]
        else:
            out["choices"] = [{"index": 0, "text": "".join(text), "finish_reason": reason, "logprobs": None}]
        out["usage"] = usage
        return JSONResponse(out)

    async def sse(self, kind, rid, job, events, gp, t0):
        def data(obj):
            return f"data: {json.dumps(obj)}\n\n"

        def chunk(piece=None, reason=None, role=False):
            c = self._head(kind, rid, chunk=True)
            if kind == "chat":
                delta = {} if piece is None else {"content": piece}
                if role:
                    delta["role"] = "assistant"
                c["choices"] = [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}]
            else:
                c["choices"] = [{"index": 0, "text": piece or "", "finish_reason": reason, "logprobs": None}]
            if gp.include_usage:
                c["usage"] = None
            return data(c)

        try:
            if kind == "chat":
                yield chunk("", role=True)
            while True:
                ev = await events.get()
                if ev[0] == "piece":
                    yield chunk(ev[1])
                elif ev[0] == "done":
                    yield chunk(reason=ev[1])
                    if gp.include_usage:
                        c = self._head(kind, rid, chunk=True)
                        c["choices"] = []
                        c["usage"] = ev[2]
                        yield data(c)
                    break
                else:
                    yield data(error_body(f"generation failed: {ev[1]}"))
                    break
            yield "data: [DONE]\n\n"
            self.metrics.observe("request_duration_seconds", time.perf_counter() - t0)
        finally:
            if job.finish_reason is None:
                self.scheduler.cancel(job)

    # ------------------------------------------------------------ endpoints
    async def completions(self, request):
        return await self.generate(request, "completion")

    async def chat_completions(self, request):
        return await self.generate(request, "chat")

    def _model_card(self):
        return {"id": self.model_id, "object": "model", "created": self.created, "owned_by": "edgerun",
                "meta": {"n_ctx": self.n_ctx, "n_vocab": self.n_vocab, "file": self.model.path.name,
                         "chat_template": self.template is not None}}

    async def models(self, request):
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    async def model_card(self, request):
        self.check_model(request.path_params["name"])
        return JSONResponse(self._model_card())

    async def health(self, request):
        return JSONResponse({"status": "ok", "model": self.model_id, **self.scheduler.state()})

    async def prometheus(self, request):
        return PlainTextResponse(self.metrics.text(), media_type="text/plain; version=0.0.4; charset=utf-8")


def _guard(service, endpoint, handler):
    """Every answer of `handler` counted; an APIError answered with its
    status and body; anything else a 500 with an OpenAI body (logged), and the
    server goes on."""
    async def run(request):
        try:
            response = await handler(request)
        except APIError as e:
            response = JSONResponse(e.body(), status_code=e.status, headers=e.headers)
        except Exception as e:     # noqa: BLE001 -- a bug of ours must not take the server down
            log.exception("%s failed", endpoint)
            response = JSONResponse(error_body(f"internal error: {type(e).__name__}: {e}"), status_code=500)
        service.metrics.inc("requests_total", endpoint=endpoint, code=response.status_code)
        return response
    return run


async def _http_error(request, exc):
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return JSONResponse({"error": {"message": f"{request.method} {request.url.path}: {exc.detail}", "type": kind,
                                   "param": None, "code": None}}, status_code=exc.status_code)


def create_app(model, scheduler, metrics, model_id=None, chat_template=None, max_body=MAX_BODY):
    """The starlette app over an opened model and its running scheduler."""
    svc = _Service(model, scheduler, metrics, model_id or model.path.stem, chat_template, max_body)
    routes = [
        Route("/v1/completions", _guard(svc, "/v1/completions", svc.completions), methods=["POST"]),
        Route("/v1/chat/completions", _guard(svc, "/v1/chat/completions", svc.chat_completions), methods=["POST"]),
        Route("/v1/models", _guard(svc, "/v1/models", svc.models), methods=["GET"]),
        Route("/v1/models/{name:path}", _guard(svc, "/v1/models/{name}", svc.model_card), methods=["GET"]),
        Route("/health", _guard(svc, "/health", svc.health), methods=["GET"]),
        Route("/metrics", _guard(svc, "/metrics", svc.prometheus), methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.service = svc
    return app
