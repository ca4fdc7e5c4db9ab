"""edgerun.Model: one opened GGUF model and the generation loop around the C session API.

Each generate()/logits() call takes a fresh session slot (KV cache, history and
RNG live in the model's arena) and gives it back when done, so calls never see
each other's state and the same seed always gives the same tokens. A stream
that must outlive one call (a conversation, a snapshot to resume from) is a
Session: Model.session().
"""
import os
import pathlib

import numpy as np

from . import errors
from ._ffi import check, ffi, lib
from .session import Session, finish, prepare, sampling

_HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_MODEL_NAME = "edgerun-add.gguf"
ARENA_ALIGN = 64          # er_options.arena must be aligned to this (ER_ARENA_ALIGN)
_KV_TYPES = {"f32": 0, "f16": 1}
MAX_TRACE_EVENTS = 1 << 24   # er_options.trace_events range (ER_MAX_TRACE_EVENTS)


def default_model_path():
    """The embedded default model: installed in the package, or models/ of a checkout."""
    for p in (_HERE / "models" / DEFAULT_MODEL_NAME, _HERE.parent.parent / "models" / DEFAULT_MODEL_NAME):
        if p.exists():
            return p
    raise errors.FileAccessError(
        f"the embedded default model {DEFAULT_MODEL_NAME} is not installed; pass a model path, "
        "or train it with `python scripts/train_default_model.py` in a checkout", -2)


# [start, end) of the caller-provided arenas of open models (Model(arena=...))
_ARENAS_IN_USE = set()


def aligned_buffer(nbytes):
    """A writable numpy uint8 buffer of exactly `nbytes` whose address is
    64-byte aligned, as a caller-provided arena must be."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise errors.InvalidArgumentError(f"nbytes must be an integer >= 0, got {nbytes!r}", -1)
    raw = np.zeros(nbytes + ARENA_ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % ARENA_ALIGN
    return raw[off:off + nbytes]


def cpu_mask_of(cpus):
    """er_options.cpu_mask for `cpus`: None/0/[] (no pinning), an int bit mask,
    or CPU numbers (iterable of ints, e.g. a board's big cores: boards.load(
    "rk3588").cpus("big")). Numbers must be in [0, 63]: the mask is 64 bits."""
    if cpus is None:
        return 0
    if isinstance(cpus, (int, np.integer)) and not isinstance(cpus, bool):
        if cpus < 0 or cpus >= 1 << 64:
            raise errors.InvalidArgumentError(f"cpu_mask must be a 64-bit mask >= 0, got {cpus!r}", -1)
        return int(cpus)
    try:
        ids = list(cpus)
    except TypeError:
        raise errors.InvalidArgumentError(
            f"cpu_mask must be an int bit mask or CPU numbers, got {cpus!r}", -1) from None
    mask = 0
    for c in ids:
        if not isinstance(c, (int, np.integer)) or isinstance(c, bool) or not 0 <= c < 64:
            raise errors.InvalidArgumentError(f"cpu_mask: CPU numbers must be integers in [0, 63], got {c!r}", -1)
        mask |= 1 << int(c)
    return mask


DEVICES = ("cpu", "cuda")


def isa_for_device(device, isa=None):
    """The er_options.isa for `device` ("cpu" / "cuda"; None = "cpu") and an
    optional forced CPU kernel table: "cuda" selects the CUDA backend."""
    if device is None:
        device = "cpu"
    if device not in DEVICES:
        raise errors.InvalidArgumentError(f"device must be one of {', '.join(DEVICES)}, got {device!r}", -1)
    if device == "cuda":
        if isa not in (None, "", "cuda"):
            raise errors.InvalidArgumentError(
                f"isa {isa!r} names a CPU kernel table; it cannot be combined with device='cuda'", -1)
        return "cuda"
    return isa


CTX_STRATEGIES = {"fail": 0, "slide": 1, "slide_prefill": 2}  # er_options.ctx_strategy (ER_CTX_*)


def _options(n_ctx=0, n_threads=1, n_batch=0, n_sessions=1, kv_type="f32", isa=None, arena=None,
             trace_events=0, cpu_mask=None, device=None, ctx_strategy="fail", ctx_keep=0):
    """(er_options*, objects that must stay alive while the options are in use)."""
    isa = isa_for_device(device, isa)
    opts = ffi.new("er_options *")
    check(lib.er_options_default(opts))
    keep = [opts]
    opts.cpu_mask = cpu_mask_of(cpu_mask)
    for name, v, top in (("n_ctx", n_ctx, 2**31 - 1), ("n_threads", n_threads, 2**31 - 1),
                         ("n_batch", n_batch, 2**31 - 1), ("n_sessions", n_sessions, 2**31 - 1),
                         ("trace_events", trace_events, MAX_TRACE_EVENTS), ("ctx_keep", ctx_keep, 2**31 - 1)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
            raise errors.InvalidArgumentError(f"{name} must be an integer >= 0, got {v!r}", -1)
        if v > top:
            raise errors.InvalidArgumentError(f"{name} {v} is out of range [0, {top}]", -1)
        setattr(opts, name, int(v))
    if not isinstance(kv_type, str) or kv_type not in _KV_TYPES:
        raise errors.InvalidArgumentError(f"kv_type must be 'f32' or 'f16', got {kv_type!r}", -1)
    opts.kv_type = _KV_TYPES[kv_type]
    if ctx_strategy not in CTX_STRATEGIES:
        raise errors.InvalidArgumentError(
            f"ctx_strategy must be one of {', '.join(CTX_STRATEGIES)}, got {ctx_strategy!r}", -1)
    opts.ctx_strategy = CTX_STRATEGIES[ctx_strategy]
    if isa:
        if not isinstance(isa, str) or "\0" in isa:
            raise errors.InvalidArgumentError(f"isa must be a kernel table's name, got {isa!r}", -1)
        s = ffi.new("char[]", isa.encode())
        keep.append(s)
        opts.isa = s
    if arena is not None:
        try:
            buf = ffi.from_buffer(arena, require_writable=True)
        except (TypeError, BufferError) as e:
            raise errors.InvalidArgumentError(
                f"arena must be a writable buffer (bytearray, numpy array): {e}", -1) from None
        addr = int(ffi.cast("uintptr_t", buf))
        if addr % ARENA_ALIGN:
            raise errors.InvalidArgumentError(
                f"arena buffer address is not {ARENA_ALIGN}-byte aligned; allocate it with "
                "edgerun.aligned_buffer(nbytes)", -1)
        keep += [arena, buf]
        opts.arena = buf
        opts.arena_bytes = len(buf)
    return opts, keep


def _plan_dict(rep):
    sections = []
    for i in range(rep.n_sections):
        s = rep.sections[i]
        sections.append({"name": ffi.string(s.name).decode(), "bytes": int(s.bytes), "used": int(s.used),
                         "persistent": bool(s.persistent),
                         "device": {0: "host", 1: "gpu"}.get(int(s.device), str(s.device))})
    return {"sections": sections, "total_bytes": int(rep.total_bytes), "device_bytes": int(rep.device_bytes),
            "pinned_bytes": int(rep.pinned_bytes), "n_ctx": int(rep.n_ctx),
            "n_batch": int(rep.n_batch), "n_threads": int(rep.n_threads), "n_sessions": int(rep.n_sessions),
            "kv_type": {v: k for k, v in _KV_TYPES.items()}.get(int(rep.kv_type), str(rep.kv_type))}


def _path_arg(path):
    if path is None:
        return default_model_path()
    p = pathlib.Path(os.fspath(path))
    if not p.exists():
        raise errors.FileAccessError(f"{p}: no such model file; check the path", -2)
    return p


def plan(path=None, **options):
    """The arena plan for opening `path` with `options` (as Model takes), computed
    without allocating the arena."""
    p = _path_arg(path)
    opts, _keep = _options(**options)
    rep = ffi.new("er_plan_report *")
    check(lib.er_plan(str(p).encode(), opts, rep))
    return _plan_dict(rep)


class Model:
    """An opened GGUF model. Use as a context manager or call close().

    trace_events > 0 plans a ring of that many op timings in the arena and
    records into it from open (see trace()); 0 costs nothing. device="cuda"
    runs the model on GPU 0 (a library built with -Dcuda=enabled; otherwise,
    or without a GPU/driver, UnsupportedError says which is missing); the
    default "cpu" uses the kernel table `isa` or the best for this CPU.
    cpu_mask pins the worker threads (not the calling thread, which takes
    part in every step: pin it yourself with os.sched_setaffinity) to CPUs
    given as a bit mask or CPU numbers, e.g. a board's big cores:
    Board.cpus("big").
    ctx_strategy says what a session that fills n_ctx does: "fail" (a
    prompt that does not fit raises ContextFullError; generate() stops at
    the last position, stats()["stopped"] == "context"), "slide" (keep the
    first ctx_keep tokens and the most recent half of the rest, the cache
    re-rotated in place) or "slide_prefill" (the same tokens, prefilled
    again); edgerun.h, ER_CTX_SLIDE.

    Threads: sessions are one thread's each; close() must not run while
    another thread is inside a call on the model, its sessions or its
    tokenizer (it frees what that call reads). Finish or join them first;
    a stream left open is fine, its next step raises StateError."""

    def __init__(self, path=None, n_ctx=0, n_threads=1, n_batch=0, n_sessions=1, kv_type="f32",
                 isa=None, arena=None, trace_events=0, cpu_mask=None, device=None, ctx_strategy="fail",
                 ctx_keep=0):
        self._ptr = None
        self._arena = None
        self._sessions = set()
        self.path = _path_arg(path)
        opts, self._keep = _options(n_ctx, n_threads, n_batch, n_sessions, kv_type, isa, arena, trace_events,
                                    cpu_mask, device=device, ctx_strategy=ctx_strategy, ctx_keep=ctx_keep)
        self.trace_events = int(trace_events)
        self.ctx_strategy, self.ctx_keep = ctx_strategy, int(ctx_keep)
        if opts.arena != ffi.NULL:
            lo = int(ffi.cast("uintptr_t", opts.arena))
            span = (lo, lo + int(opts.arena_bytes))
            # Two models in one buffer overwrite each other's weights and
            # caches: wrong logits at best, a crash at worst.
            if any(a < span[1] and span[0] < b for a, b in _ARENAS_IN_USE):
                raise errors.InvalidArgumentError("arena buffer is already the arena of an open model; "
                                                  "give each model a buffer of its own", -1)
        out = ffi.new("er_model **")
        check(lib.er_model_open(str(self.path).encode(), opts, out))
        self._ptr = out[0]
        if opts.arena != ffi.NULL:
            self._arena = span
            _ARENAS_IN_USE.add(span)
        hp = ffi.new("er_hparams *")
        check(lib.er_model_hparams(self._ptr, hp))
        self._hparams = {
            "arch": ffi.string(hp.arch).decode(), "name": ffi.string(hp.name).decode("utf-8", "replace"),
            "n_vocab": hp.n_vocab, "n_embd": hp.n_embd, "n_layer": hp.n_layer, "n_head": hp.n_head,
            "n_head_kv": hp.n_head_kv, "n_ff": hp.n_ff, "n_ctx_train": hp.n_ctx_train, "head_dim": hp.head_dim,
            "rope_freq_base": float(hp.rope_freq_base), "rms_eps": float(hp.rms_eps),
            "tied_output": bool(hp.tied_output), "has_qkv_bias": bool(hp.has_qkv_bias),
            "n_params": int(hp.n_params), "weight_bytes": int(hp.weight_bytes),
            # the family's traits (runtime_c/src/family.c)
            "n_rot": hp.n_rot, "rope_scale": float(hp.rope_scale), "rope_freq_factors": bool(hp.rope_freq_factors),
            "rope_freq_base_swa": float(hp.rope_freq_base_swa), "sliding_window": hp.sliding_window,
            "final_logit_softcap": float(hp.final_logit_softcap), "rope_longrope": hp.rope_longrope,
            "rope_attn_factor": float(hp.rope_attn_factor), "rope_orig_ctx": hp.rope_orig_ctx,
        }
        self.n_vocab = int(hp.n_vocab)
        self._vocab = lib.er_model_vocab(self._ptr)
        if self._vocab == ffi.NULL:
            self._vocab = None
        self._tokenizer = None
        self._stats = {}
        self.n_ctx = self.plan()["n_ctx"]

    # ------------------------------------------------------------ lifetime
    def close(self):
        if self._ptr is not None:
            if self._tokenizer is not None:
                self._tokenizer._invalidate()     # its vocab lives in our arena
            for s in list(self._sessions):
                lib.er_session_free(s)
            self._sessions.clear()
            lib.er_model_close(self._ptr)
            self._ptr = None
            _ARENAS_IN_USE.discard(self._arena)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _live(self):
        if self._ptr is None:
            raise errors.StateError("the model is closed; open a new edgerun.Model", -10)
        return self._ptr

    def __repr__(self):
        state = "closed" if self._ptr is None else f"n_ctx={self.n_ctx}"
        return f"<edgerun.Model {self.path.name} {self._hparams['arch']} {state}>"

    # ------------------------------------------------------------ facts
    @property
    def hparams(self):
        return dict(self._hparams)

    @property
    def fingerprint(self):
        """64-bit identity of the weights and shapes; snapshots are bound to it."""
        out = ffi.new("uint64_t *")
        check(lib.er_model_fingerprint(self._live(), out))
        return int(out[0])

    @property
    def isa(self):
        return ffi.string(lib.er_model_isa(self._live())).decode()

    @property
    def device(self):
        """"cuda" when the CUDA backend runs the model, else "cpu"."""
        return "cuda" if self.isa == "cuda" else "cpu"

    @property
    def isa_reason(self):
        return ffi.string(lib.er_model_isa_reason(self._live())).decode()

    def tensors(self):
        m = self._live()
        out = []
        info = ffi.new("er_tensor_info *")
        for i in range(check(lib.er_model_n_tensors(m))):
            check(lib.er_model_tensor(m, i, info))
            out.append({"name": ffi.string(info.name).decode("utf-8", "replace"),
                        "type": ffi.string(info.type_name).decode(), "type_id": int(info.type),
                        "shape": [int(info.ne[d]) for d in range(info.n_dims)],
                        "offset": int(info.offset), "nbytes": int(info.nbytes)})
        return out

    def plan(self):
        """The arena plan the model was opened with; `used` holds high-water marks."""
        rep = ffi.new("er_plan_report *")
        check(lib.er_model_arena(self._live(), rep))
        return _plan_dict(rep)

    @property
    def tokenizer(self):
        if self._vocab is None:
            return None
        if self._tokenizer is None:
            from .tokenizer import Tokenizer
            self._tokenizer = Tokenizer._from_vocab(self._vocab, self)
        return self._tokenizer

    def stats(self):
        """Figures of the last generate(): timings, token counts, why it stopped, arena use."""
        s = dict(self._stats)
        p = self.plan()
        s["arena"] = {sec["name"]: {"bytes": sec["bytes"], "used": sec["used"]} for sec in p["sections"]}
        s["arena_total"] = p["total_bytes"]
        return s

    # ------------------------------------------------------------ tokens
    def _encode(self, text, add_special):
        if self._vocab is None:
            raise errors.UnsupportedError(
                f"{self.path.name} has no tokenizer; pass a list of token ids instead of text "
                "(`edgerun run --ids`)", -4)
        return self.tokenizer.encode(text, add_special=add_special)

    def session(self):
        """A Session: a generation stream that keeps its KV cache between calls
        and can be saved and loaded. Takes one of the n_sessions slots until
        closed (BusyError when none is free)."""
        return Session(self)

    def _session(self):
        out = ffi.new("er_session **")
        check(lib.er_session_new(self._live(), out))
        self._sessions.add(out[0])
        return out[0]

    def _free(self, s):
        if s in self._sessions:
            self._sessions.discard(s)
            lib.er_session_free(s)

    def logits(self, ids):
        """Float32 logits (len(ids), n_vocab) after every token, from position 0."""
        ids = self._ids(ids)
        out = np.empty((len(ids), self.n_vocab), dtype=np.float32)
        arr = ffi.new("int32_t[]", ids)
        s = self._session()
        try:
            check(lib.er_decode_all(s, arr, len(ids), ffi.cast("float *", ffi.from_buffer(out)), out.size))
        finally:
            self._free(s)
        return out

    def decode_batch(self, work):
        """One forward step for several sessions of this model (er_decode_batch):
        work is [(Session, ids)], each session at most once, the ids of all of
        them together at most n_batch. Appends each session's ids and returns
        their logits after the last one, float32 (n_vocab,) arrays of their own,
        in work's order: bit for bit what Session.decode gives each alone."""
        work = list(work)
        if not work:
            raise errors.InvalidArgumentError("decode_batch: no sessions given", -1)
        n = len(work)
        ptrs = ffi.new("er_session *[]", n)
        arrs = [ffi.new("int32_t[]", self._ids(ids)) for _, ids in work]
        ids_p = ffi.new("int32_t *[]", arrs)
        lens = ffi.new("size_t[]", [len(a) for a in arrs])
        for i, (sess, _) in enumerate(work):
            if getattr(sess, "_model", None) is not self:
                raise errors.InvalidArgumentError(f"decode_batch: entry {i} is not a Session of this model", -1)
            ptrs[i] = sess._live()
        out = ffi.new("float *[]", n)
        check(lib.er_decode_batch(ptrs, ids_p, lens, n, out))
        return [np.frombuffer(ffi.buffer(out[i], 4 * self.n_vocab), dtype=np.float32).copy() for i in range(n)]

    def _ids(self, ids):
        # int() would take 1.9 as 1, "12" as 12 and the bytes of b"text" as
        # ids: a prompt of other types is refused, not guessed at
        if isinstance(ids, (str, bytes, bytearray, memoryview)) or not hasattr(ids, "__iter__"):
            raise errors.InvalidArgumentError(
                f"token ids must be a list of integers, got {type(ids).__name__}; text goes in as a str", -1)
        ids = list(ids)
        wrong = next((i for i in ids if isinstance(i, bool) or not isinstance(i, (int, np.integer))), None)
        if wrong is not None:
            raise errors.InvalidArgumentError(f"token ids must be integers, got {wrong!r}", -1)
        ids = [int(i) for i in ids]
        if not ids:
            raise errors.InvalidArgumentError("the prompt is empty; pass at least one token", -1)
        bad = [i for i in ids if not 0 <= i < self.n_vocab]
        if bad:
            raise errors.InvalidArgumentError(
                f"token id {bad[0]} is out of range for a vocabulary of {self.n_vocab}", -1)
        if len(ids) > self.n_ctx and self.ctx_strategy == "fail":
            raise errors.ContextFullError(
                f"the prompt has {len(ids)} tokens but the context holds {self.n_ctx}; "
                f"shorten the prompt or open the model with a larger n_ctx", -7)
        return ids

    # ------------------------------------------------------------ generation
    def generate(self, prompt, max_tokens=64, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 repeat_penalty=1.0, repeat_last_n=0, seed=None, stream=False, stop=None,
                 stop_at_eos=True, add_special=True):
        """Continues `prompt` (text, or a list of token ids).

        Text in -> text out (str, or str pieces with stream=True); ids in -> ids out.
        Stops at max_tokens, at an end-of-generation token (stop_at_eos), at any
        string in `stop` (text prompts; the stop string is not returned), or when
        the context is full (stats()["stopped"] says which).
        """
        text_mode, ids, stops = prepare(self, prompt, max_tokens, stop, add_special)
        params = sampling(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n)
        stats = {}

        def run():
            # The slot is taken at the first token, not at the call, so an
            # unstarted stream holds nothing.
            with Session(self) as s:
                if seed is not None:
                    s.seed(seed)
                yield from s._run(ids, max_tokens, params, stop_at_eos, decode_last=False, stats=stats)

        return finish(self, run(), text_mode, stops, stream, stats)

    # ------------------------------------------------------------ tracing
    def trace(self, prompt, path=None, **gen):
        """Runs generate(prompt, **gen) with op tracing on and returns its
        events, oldest first: dicts with op (name), op_id, layer (-1 outside
        the layer stack), thread (0 = caller, 1.. = pool workers), shape, and
        start_ns/end_ns (monotonic, since open). With `path`, also writes them
        as Chrome trace-event JSON (Perfetto, chrome://tracing). Needs a model
        opened with trace_events > 0; when the ring is too small the oldest
        events are overwritten (then len(events) == trace_events)."""
        m = self._live()
        if self.trace_events == 0:
            raise errors.StateError("tracing needs a ring: open the model with trace_events > 0 "
                                    "(about steps x (3 + 10 x n_layer) x n_threads events)", -10)
        check(lib.er_trace_reset(m))
        check(lib.er_trace_enable(m, 1))
        out = self.generate(prompt, **dict(gen, stream=False))
        n = check(lib.er_trace_count(m))
        ev = ffi.new("er_trace_event *")
        events = []
        for i in range(n):
            check(lib.er_trace_get(m, i, ev))
            events.append({"op": ffi.string(lib.er_trace_op_name(ev.op)).decode(), "op_id": int(ev.op),
                           "layer": int(ev.layer), "thread": int(ev.thread),
                           "shape": [int(ev.shape[0]), int(ev.shape[1]), int(ev.shape[2])],
                           "start_ns": int(ev.t_start_ns), "end_ns": int(ev.t_end_ns)})
        if path is not None:
            check(lib.er_trace_export(m, os.fsencode(os.fspath(path))))
        self._stats["trace_events"] = n
        self._stats["output"] = out
        return events

    # ------------------------------------------------------------ chat (edgerun.chat does the work)
    def chat(self, messages, chat_template=None, tools=None, variables=None, stream=False, **gen):
        """The model's reply to `messages` ([{"role": ..., "content": ...}]),
        rendered with the file's chat template (or `chat_template` text), until
        the end of its turn. Keywords and streaming as generate(); variables:
        further template names (enable_thinking, ...). See edgerun.chat.chat."""
        from .chat import chat
        return chat(self, messages, chat_template=chat_template, tools=tools, variables=variables,
                    stream=stream, **gen)

    def chat_session(self, system=None, **kw):
        """A multi-turn conversation on one runtime session that prefills only
        what each turn adds: edgerun.chat.ChatSession (send, reply, reset,
        save, load, stats)."""
        from .chat import ChatSession
        return ChatSession(self, system=system, **kw)
