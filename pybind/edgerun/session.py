"""edgerun.Session: one generation stream of a Model (KV cache, token history,
sampler RNG) that lives across calls and survives the process in a snapshot.

    with edgerun.Model() as m, m.session() as s:
        s.generate("0012+0034=", max_tokens=3)
        s.save("sum.snap")              # atomic: the file is the old or the new snapshot
    ...
    with edgerun.Model() as m, m.session() as s:
        s.load("sum.snap")              # MismatchError if another model wrote it
        s.generate("", max_tokens=2)    # "" / None / []: continue where it stopped

Model.generate() runs on a throwaway Session, so both go through the one
generation loop below (_run): what one does, the other does.
"""
import os
import time

import numpy as np

from . import errors
from ._ffi import check, ffi, lib

_ER_ECONTEXT = -7


def _int_arg(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise errors.InvalidArgumentError(f"{name} must be an integer, got {v!r}", -1)
    if not -2**31 <= v < 2**31:
        raise errors.InvalidArgumentError(f"{name} {v} is out of range", -1)
    return int(v)


def sampling(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, repeat_last_n=0):
    """An er_sampling* from keyword arguments, its ranges checked here
    (er_sampling_check): a mistake raises at the call, before a prompt is
    prefilled into the cache."""
    params = ffi.new("er_sampling *")
    check(lib.er_sampling_default(params))
    for name, v in (("temperature", temperature), ("top_p", top_p), ("min_p", min_p),
                    ("repeat_penalty", repeat_penalty)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise errors.InvalidArgumentError(f"{name} must be a number, got {v!r}", -1)
    params.temperature = float(temperature)
    params.top_k = _int_arg("top_k", top_k)
    params.top_p = float(top_p)
    params.min_p = float(min_p)
    params.repeat_penalty = float(repeat_penalty)
    params.repeat_last_n = _int_arg("repeat_last_n", repeat_last_n)
    check(lib.er_sampling_check(params))
    return params


def _path(path):
    try:
        b = os.fsencode(os.fspath(path))
    except TypeError:
        raise errors.InvalidArgumentError(f"a snapshot path must be a str or os.PathLike, got {path!r}", -1) \
            from None
    if b"\0" in b:   # C would stop at it and use another file
        raise errors.InvalidArgumentError(f"a snapshot path must not contain a NUL character, got {path!r}", -1)
    return b


class Session:
    """A session slot of a Model. Use one thread at a time; close() (or a with
    block) gives the slot back. Closing the model closes its sessions."""

    def __init__(self, model):
        self._model = model
        self._ptr = None
        self._stats = {}
        self._streams = 0                 # generate() calls started: the latest owns the slot (_run)
        self._ptr = model._session()      # BusyError when every slot is taken
        self.n_ctx = int(check(lib.er_session_n_ctx(self._ptr)))

    # ------------------------------------------------------------ lifetime
    def close(self):
        if self._ptr is not None:
            self._model._free(self._ptr)
            self._ptr = None

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
        # The model frees every slot when it closes; after that our pointer
        # names a slot of freed memory, so membership is the liveness test.
        if self._ptr is None or self._ptr not in self._model._sessions:
            raise errors.StateError("the session is closed (or its model is); open one with Model.session()", -10)
        return self._ptr

    def __repr__(self):
        state = "closed" if self._ptr is None or self._ptr not in self._model._sessions else f"pos={self.pos}"
        return f"<edgerun.Session of {self._model.path.name} {state} n_ctx={self.n_ctx}>"

    # ------------------------------------------------------------ state
    @property
    def pos(self):
        """Tokens in the KV cache."""
        return int(check(lib.er_session_pos(self._live())))

    def history(self):
        """The token ids the cache holds, in position order (after a sliding
        context's shift: the kept ones, moved down)."""
        ids = ffi.new("int32_t **")
        n = int(check(lib.er_session_history(self._live(), ids)))
        return [int(ids[0][i]) for i in range(n)]

    def reset(self):
        """Forgets every token (position 0); keeps the RNG state."""
        check(lib.er_session_reset(self._live()))

    def truncate(self, n):
        """Keeps the first n tokens of the cache and forgets the rest, so the
        next decode appends at position n (a shared prefix kept instead of
        prefilled again). UnsupportedError where the model's sliding-window
        rings or convolution state no longer hold what position n reads
        (nothing changes; reset and prefill instead)."""
        check(lib.er_session_truncate(self._live(), _int_arg("n", n)))

    def seed(self, n):
        """Seeds the sampler (the same seed gives the same tokens)."""
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise errors.InvalidArgumentError(f"seed must be an integer, got {n!r}", -1)
        check(lib.er_session_seed(self._live(), int(n) & 0xFFFFFFFFFFFFFFFF))

    def stats(self):
        """The runtime's own timings of this session, plus the last generate()'s figures."""
        st = ffi.new("er_stats *")
        check(lib.er_session_stats(self._live(), st))
        out = {k: getattr(st, k) for k in ("prefill_ms", "decode_ms", "sample_ms", "n_prefill_tokens",
                                            "n_decode_tokens", "last_prefill_ms")}
        out["generate"] = dict(self._stats)
        return out

    # ------------------------------------------------------------ snapshots
    def save(self, path):
        """Writes the session (KV cache, history, logits, RNG) to `path`
        atomically: a crash leaves the previous file or the new one, whole."""
        check(lib.er_session_save(self._live(), _path(path)))

    def load(self, path):
        """Replaces the session with the snapshot at `path`; on any error the
        session is unchanged. Raises MismatchError (another model or KV type),
        CorruptModelError (not a snapshot, truncated, checksum), ContextFullError
        (more positions than n_ctx), FileAccessError."""
        check(lib.er_session_load(self._live(), _path(path)))

    # ------------------------------------------------------------ steps
    def decode(self, ids):
        """Appends token ids (one forward pass) and returns the float32 logits
        (n_vocab,) after the last one, as an array of its own."""
        s = self._live()
        ids = self._model._ids(ids)
        arr = ffi.new("int32_t[]", ids)
        out = ffi.new("float **")
        check(lib.er_decode(s, arr, len(ids), out))
        return np.frombuffer(ffi.buffer(out[0], 4 * self._model.n_vocab), dtype=np.float32).copy()

    def sample(self, **params):
        """The next token id from the last logits (not appended; decode it to
        continue). Keywords as generate(): temperature, top_k, top_p, min_p,
        repeat_penalty, repeat_last_n; none = greedy. StateError before any decode."""
        tok = ffi.new("int32_t *")
        check(lib.er_sample(self._live(), sampling(**params), tok))
        return int(tok[0])

    def generate(self, prompt=None, max_tokens=64, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 repeat_penalty=1.0, repeat_last_n=0, seed=None, stream=False, stop=None,
                 stop_at_eos=True, add_special=None):
        """Appends `prompt` (text or ids; "", [] or None: nothing) and generates
        as Model.generate does. Unlike Model.generate, every generated token is
        also decoded, so the session ends holding prompt + output, and a later
        generate("") continues exactly where this one stopped. add_special
        defaults to True only at position 0 (no BOS in mid-conversation)."""
        s = self._live()
        pos = int(check(lib.er_session_pos(s)))
        if add_special is None:
            add_special = pos == 0
        text_mode, ids, stops = prepare(self._model, prompt, max_tokens, stop, add_special, allow_empty=True)
        if not ids and pos == 0:
            raise errors.InvalidArgumentError("the session is empty; pass a prompt to start from", -1)
        if len(ids) > self.n_ctx - pos and self._model.ctx_strategy == "fail":
            raise errors.ContextFullError(
                f"the prompt has {len(ids)} tokens but the session has room for {self.n_ctx - pos} "
                f"(pos {pos} of n_ctx {self.n_ctx}); reset() it or open the model with a larger n_ctx "
                f"(--ctx on the command line)", -7)
        params = sampling(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n)
        if seed is not None:
            self.seed(seed)
        self._stats = {}
        gen = self._run(ids, max_tokens, params, stop_at_eos, decode_last=True, stats=self._stats)
        return finish(self._model, gen, text_mode, stops, stream, self._stats, continuing=not ids)

    # ------------------------------------------------------------ the generation loop
    def _run(self, ids, max_tokens, params, stop_at_eos, decode_last, stats):
        """Yields generated ids and fills `stats` as it goes. decode_last=False
        skips the forward pass of the final token: a throwaway session never
        reads its logits."""
        model = self._model
        stats.clear()
        stats.update({"n_prompt": len(ids), "n_generated": 0, "stopped": "max_tokens", "ttft_ms": 0.0,
                      "prefill_ms": 0.0, "decode_ms": 0.0, "prefill_tokens_per_s": 0.0,
                      "decode_tokens_per_s": 0.0})
        model._stats = stats
        # A stream is a generator: between two of its tokens the caller may
        # close the session or the model, or start another generate() on the
        # session. Each step asks again whether the slot is still this
        # stream's, since a pointer kept from the start may by then name
        # freed memory or another session's slot.
        self._streams += 1
        mine = self._streams

        def live():
            if self._streams != mine:
                raise errors.StateError("a later generate() on this session ended this stream; "
                                        "finish one stream before starting the next", -10)
            return self._live()

        t0 = time.perf_counter()
        if ids:
            arr = ffi.new("int32_t[]", ids)
            check(lib.er_decode(live(), arr, len(ids), ffi.NULL))
            t1 = time.perf_counter()
            stats["prefill_ms"] = (t1 - t0) * 1e3
            stats["prefill_tokens_per_s"] = len(ids) / max(t1 - t0, 1e-9)
        tok = ffi.new("int32_t *")
        one = ffi.new("int32_t[1]")
        vocab = model._vocab
        n_decoded, decode_s = 0, 0.0
        for i in range(max_tokens):
            check(lib.er_sample(live(), params, tok))
            t = int(tok[0])
            if i == 0:
                stats["ttft_ms"] = (time.perf_counter() - t0) * 1e3
            if stop_at_eos and vocab is not None and lib.er_vocab_is_eog(vocab, t):
                stats["stopped"] = "eos"
                return
            stats["n_generated"] += 1
            yield t
            if i + 1 == max_tokens and not decode_last:
                break
            one[0] = t
            ta = time.perf_counter()
            rc = lib.er_decode(live(), one, 1, ffi.NULL)
            if rc == _ER_ECONTEXT:
                stats["stopped"] = "context"
                return
            check(rc)
            decode_s += time.perf_counter() - ta
            n_decoded += 1
            stats["decode_ms"] = decode_s * 1e3
            stats["decode_tokens_per_s"] = n_decoded / max(decode_s, 1e-9)


# ---------------------------------------------------------------- shared by Model.generate

def prepare(model, prompt, max_tokens, stop, add_special, allow_empty=False):
    """Checks a generate() request up front (so mistakes raise at the call, not
    at the first token of a stream): (text_mode, prompt ids, stop strings)."""
    text_mode = isinstance(prompt, str)
    if stop and not text_mode:
        raise errors.InvalidArgumentError("stop strings need a text prompt; with ids, stop on ids yourself", -1)
    check_max_tokens(max_tokens)
    if allow_empty and (prompt is None or len(prompt) == 0):
        ids = []
    else:
        ids = model._ids(model._encode(prompt, add_special) if text_mode else prompt)
    return text_mode, ids, stop_strings(stop)


def check_max_tokens(max_tokens):
    if not isinstance(max_tokens, (int, np.integer)) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise errors.InvalidArgumentError(f"max_tokens must be an integer >= 0, got {max_tokens!r}", -1)


def stop_strings(stop):
    """generate()'s stop argument (None, a string, or a list of them) as a list;
    "" stops nothing (StopCut drops it, as the server does)."""
    stop = list(stop) if isinstance(stop, (list, tuple)) else [] if stop is None else [stop]
    if not all(isinstance(x, str) for x in stop):
        raise errors.InvalidArgumentError(f"stop must be a string or a list of strings, got {stop!r}", -1)
    return [x for x in stop if x]


def finish(model, id_gen, text_mode, stops, stream, stats, continuing=False):
    """Text pieces or ids, streamed or collected, as generate() promises."""
    gen = _text(model, id_gen, stops, stats, continuing) if text_mode else id_gen
    if stream:
        return gen
    out = list(gen)
    return "".join(out) if text_mode else out


def _text(model, id_gen, stops, stats, continuing):
    """Turns ids into text pieces with the streaming detokenizer (a UTF-8
    character split across tokens comes out whole), and cuts at stop strings,
    holding back any tail that could still grow into one."""
    dec = model.tokenizer.stream_decoder()
    if continuing:
        # SentencePiece drops the leading space of the first token of a text
        # only; a continued stream is not the start of one.
        dec._state.n_emitted = 1
    pending = ""
    longest = max((len(x) for x in stops), default=0)

    def step(piece):
        nonlocal pending
        pending += piece
        for x in stops:
            k = pending.find(x)
            if k >= 0:
                return pending[:k], True
        keep = 0
        for x in stops:
            for j in range(min(len(x) - 1, len(pending)), 0, -1):
                if pending.endswith(x[:j]):
                    keep = max(keep, j)
                    break
        out = pending[:len(pending) - keep] if keep else pending
        pending = pending[len(out):]
        return out, False

    for t in id_gen:
        piece = dec.feed(t)
        if not longest:
            if piece:
                yield piece
            continue
        out, hit = step(piece)
        if hit:
            stats["stopped"] = "stop"
            id_gen.close()
        if out:
            yield out
        if hit:
            return
    tail = dec.flush()
    if longest:
        out, hit = step(tail)
        if hit:
            stats["stopped"] = "stop"
            if out:
                yield out
            return
        tail = out + pending
    if tail:
        yield tail
