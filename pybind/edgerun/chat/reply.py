"""One reply of a chat: prefill what the KV cache lacks, then sample and
decode token by token until the vocabulary ends the turn, and settle the
conversation however the reply ends (finished, abandoned, interrupted)."""
import time

from .. import errors
from .._ffi import check, ffi, lib
from .model_info import common_prefix

_ER_ECONTEXT = -7


def sampling_params(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, repeat_last_n=0):
    """An er_sampling* from keyword arguments (the C side checks the ranges
    at the first sample)."""
    params = ffi.new("er_sampling *")
    check(lib.er_sampling_default(params))
    try:
        params.temperature = float(temperature)
        params.top_k = int(top_k)
        params.top_p = float(top_p)
        params.min_p = float(min_p)
        params.repeat_penalty = float(repeat_penalty)
        params.repeat_last_n = int(repeat_last_n)
    except (TypeError, ValueError, OverflowError) as e:
        raise errors.InvalidArgumentError(f"sampling parameters must be numbers: {e}", -1) from None
    return params


class StopCut:
    """Holds back text that could still grow into a stop string; says when one
    appeared (the reply then ends before it)."""

    def __init__(self, stops):
        self.stops = [s for s in stops if s]
        self.pending = ""

    def feed(self, piece):
        """(text safe to show now, True when a stop string was hit)."""
        if not self.stops:
            return piece, False
        self.pending += piece
        hits = [k for k in (self.pending.find(s) for s in self.stops) if k >= 0]
        if hits:
            out, self.pending = self.pending[:min(hits)], ""
            return out, True
        keep = 0
        for s in self.stops:
            for j in range(min(len(s) - 1, len(self.pending)), 0, -1):
                if self.pending.endswith(s[:j]):
                    keep = max(keep, j)
                    break
        out = self.pending[:len(self.pending) - keep]
        self.pending = self.pending[len(out):]
        return out, False


class Turn:
    """One reply: prefill what the cache lacks, then sample and decode token by
    token. pieces() is the generator a caller iterates; whatever way it ends
    (finished, closed, interrupted), finish() settles the conversation."""

    def __init__(self, chat, ids, max_tokens, params, stops, pushed):
        self.chat, self.ids, self.max_tokens, self.params = chat, ids, max_tokens, params
        self.cut = StopCut(stops)
        self.pushed = pushed
        self.started = self.done = self.settled = False
        self.st = None
        self.reply_ids, self.text = [], []
        self.stopped = None
        self.gen = None

    def pieces(self):
        self.gen = self._run()
        return self.gen

    def abandon(self):
        if self.gen is not None and self.started:
            self.gen.close()               # runs _run's finally
        self._finish()

    def _run(self):
        if self.settled:
            # a later send() settled this turn before its first token, taking
            # its user message back out: running it now would answer a
            # message the conversation no longer holds
            raise errors.StateError("this reply was dropped when a later send() began; iterate a stream "
                                    "before the next send()", -10)
        self.started = True
        chat = self.chat
        try:
            yield from self._steps()
        finally:
            self._finish()
            if chat._open is self:
                chat._open = None

    def _steps(self):
        chat, ids = self.chat, self.ids
        model = chat.model
        s = chat._live()
        st = {"n_prompt": len(ids), "n_reused": 0, "n_prefilled": 0, "n_generated": 0, "stopped": None,
              "ttft_ms": 0.0, "prefill_ms": 0.0, "decode_ms": 0.0, "prefill_tokens_per_s": 0.0,
              "decode_tokens_per_s": 0.0}
        chat.turn = self.st = st
        model._stats = st                         # Model.stats() reports the chat's last turn too
        t0 = time.perf_counter()
        self._check_moved(s)                      # the session was used behind our back since last turn
        chat._forget_if_moved()
        keep = common_prefix(chat._cache, ids)
        if keep == len(ids):
            keep -= 1                             # the last prompt token runs again: its logits start the reply
        chat._rewind(keep)
        new = ids[keep:]
        chat._cache.extend(new)                   # recorded before the call: see _sync
        check(lib.er_decode(s, ffi.new("int32_t[]", new), len(new), ffi.NULL))
        self._check_moved(s)
        dt = time.perf_counter() - t0
        st.update(n_reused=keep, n_prefilled=len(new), prefill_ms=dt * 1e3,
                  prefill_tokens_per_s=len(new) / max(dt, 1e-9))
        chat.totals["prefilled"] += len(new)
        chat.totals["reused"] += keep
        chat.totals["prefill_s"] += dt

        vocab = model._vocab
        dec = model.tokenizer.stream_decoder()
        tok, one = ffi.new("int32_t *"), ffi.new("int32_t[1]")
        decode_s, n_decoded = 0.0, 0
        self.stopped = "max_tokens"
        for i in range(self.max_tokens):
            s = chat._live()                      # closed between two tokens: StateError, not freed memory
            check(lib.er_sample(s, self.params, tok))
            t = int(tok[0])
            if i == 0:
                st["ttft_ms"] = (time.perf_counter() - t0) * 1e3
            if lib.er_vocab_is_eog(vocab, t):
                self.stopped = "eos"
                break
            self.reply_ids.append(t)
            st["n_generated"] += 1
            chat.totals["generated"] += 1
            out, hit = self.cut.feed(dec.feed(t))
            if out:
                self.text.append(out)
                yield out
            if hit:
                self.stopped = "stop"
                break
            if len(chat._cache) >= chat.n_ctx and model.ctx_strategy == "fail":
                self.stopped = "context"
                break
            one[0] = t
            chat._cache.append(t)
            ta = time.perf_counter()
            s = chat._live()
            rc = lib.er_decode(s, one, 1, ffi.NULL)
            if rc == _ER_ECONTEXT:
                chat._cache.pop()
                self.stopped = "context"
                break
            check(rc)
            self._check_moved(s)
            dt = time.perf_counter() - ta
            decode_s += dt
            n_decoded += 1
            chat.totals["decode_s"] += dt
            chat.totals["decoded"] += 1
            st["decode_ms"] = decode_s * 1e3
            st["decode_tokens_per_s"] = n_decoded / max(decode_s, 1e-9)
        if self.stopped != "stop":
            tail, hit = self.cut.feed(dec.flush())
            tail += "" if hit else self.cut.pending
            if hit:
                self.stopped = "stop"
            if tail:
                self.text.append(tail)
                yield tail
        self.done = True

    def _check_moved(self, s):
        # One position per id recorded, or the runtime did something of its own.
        chat = self.chat
        if chat._known and lib.er_session_pos(s) != len(chat._cache):
            if chat.model.ctx_strategy != "fail":
                # a sliding context shifted its cache: the runtime's history
                # is what it holds now, and the next turn's prefix is found
                # against it (the kept start, usually the system prompt)
                chat._cache[:] = chat._session.history()
            else:
                chat._known = False

    def _finish(self):
        """Settles the conversation, once: a finished reply is appended; an
        abandoned one as far as it came; one abandoned before its first token
        takes the user message it came with back out."""
        if self.settled:
            return
        self.settled = True
        chat = self.chat
        chat._sync()
        if self.done or self.reply_ids:
            chat._messages.append({"role": "assistant", "content": "".join(self.text)})
            chat.totals["turns"] += 1
        elif self.pushed and chat._messages:
            chat._messages.pop()
        if self.st is not None:
            self.st["stopped"] = self.stopped if self.done else "interrupted"
