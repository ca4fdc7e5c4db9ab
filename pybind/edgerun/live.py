"""edgerun.LiveModel: a model that can be replaced while threads keep generating.

    live = edgerun.LiveModel.open("v1.gguf", n_sessions=4)
    # any number of threads:
    text = live.generate("0012+0034=", max_tokens=8)
    # meanwhile, from a control thread:
    live.swap("v2.gguf")        # requests started from now on run on v2

A request (one generate() call) runs start to end on the model that was
current when it started: its KV cache holds that model's activations, so
switching weights mid-request would silently corrupt it. A request in flight
during swap() finishes on the old weights; the old model is closed by the C
runtime when its last request ends (er_live_* in edgerun.h).

The generation loop is Session._run, the same one Model.generate and Session
use; a request only lends it a session taken from the live handle.
"""
import os
import pathlib
import threading

from . import errors
from ._ffi import check, ffi, lib
from .model import Model
from .session import Session, finish, prepare, sampling


class _HandedOver(Model):
    """A Model whose C model belongs to a LiveModel. close() leaves it to the
    handle (closing it here would pull it from under running requests), and
    once the handle has closed it every use raises StateError."""

    def close(self):
        pass

    def _encode(self, text, add_special):
        self._live()              # before the tokenizer touches a freed vocabulary
        return super()._encode(text, add_special)


class _Member:
    """A model owned by the live handle and the Python requests running on it."""

    def __init__(self, model):
        self.model = model
        self.active = 0          # requests holding a session on it
        self.retired = False     # swapped out: closed by C when `active` reaches 0
        model.__class__ = _HandedOver

    def forget(self):
        """The C model is closed: make the Python object refuse use instead of crashing."""
        m = self.model
        m._ptr = None
        m._vocab = None
        if m._tokenizer is not None:
            m._tokenizer._invalidate()     # handed out before the swap: its vocabulary went with the model
        m._tokenizer = None
        m._sessions = set()


class _Request:
    """One generate() call: a session slot on the model that was current when
    it started. Looks like a Session to Session._run (_model, _live())."""

    def __init__(self, live):
        self._owner = live        # keeps the handle alive while the request is
        self._ptr = None
        self._streams = 0         # as Session's: Session._run counts on it
        self._member = live._acquire(self)
        self._model = self._member.model

    def _live(self):
        if self._ptr is None:
            raise errors.StateError("the request has ended", -10)
        return self._ptr

    def close(self):
        if self._ptr is not None:
            self._owner._release(self)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class LiveModel:
    """A swappable model (er_live). generate() may be called from many threads
    at once (up to n_sessions requests run in parallel per model; more raise
    BusyError); swap() from any thread at any time."""

    def __init__(self, path=None, **options):
        self._ptr = None
        self._options = dict(options)
        # Reentrant: a dropped _Request's __del__ may run (garbage collection)
        # on a thread that already holds the lock.
        self._lock = threading.RLock()
        self._members = {}        # C model address -> _Member
        first = Model(path, **options)
        out = ffi.new("er_live **")
        rc = lib.er_live_open(first._ptr, out)
        if rc < 0:
            first.close()
            check(rc)
        self._ptr = out[0]
        self._current = self._key(first._ptr)
        self._members[self._current] = _Member(first)

    @classmethod
    def open(cls, path=None, **options):
        """Opens `path` (None: the embedded default model) as the first live
        model. Options as edgerun.Model; swap(path) reuses them."""
        return cls(path, **options)

    @staticmethod
    def _key(ptr):
        return int(ffi.cast("uintptr_t", ptr))

    def _handle(self):
        if self._ptr is None:
            raise errors.StateError("the LiveModel is closed; open a new one", -10)
        return self._ptr

    # ------------------------------------------------------------ swapping
    def swap(self, model, **options):
        """Makes `model` (a path, or an open edgerun.Model with no session in
        use, which the handle then owns: its close() becomes a no-op and it
        raises StateError once the handle has closed it) the
        model of every request started from now on. Requests in flight finish
        on the model they started on, which is closed when the last ends.
        Options (for a path) default to those given to open()."""
        handle = self._handle()
        opened = not isinstance(model, Model)
        if opened:
            if model is not None and not pathlib.Path(os.fspath(model)).exists():
                raise errors.FileAccessError(f"{model}: no such model file; check the path", -2)
            m = Model(model, **{**self._options, **options})
        else:
            if options:
                raise errors.InvalidArgumentError("options apply to a path; this Model is already open", -1)
            m = model
            m._live()
        try:
            with self._lock:
                check(lib.er_live_swap(handle, m._ptr))
                old = self._members[self._current]
                self._current = self._key(m._ptr)
                self._members[self._current] = _Member(m)
                old.retired = True
                if old.active == 0:    # er_live_swap closed it already
                    self._prune(old)
        except BaseException:
            if opened:
                m.close()
            raise

    def _prune(self, member):
        del self._members[self._key(member.model._ptr)]
        member.forget()

    # ------------------------------------------------------------ requests
    def _acquire(self, req):
        # Under the lock so that a member is never pruned between the C side
        # binding a session to it and this count going up (and an address is
        # never looked up after its model was freed and another reused it).
        out = ffi.new("er_session **")
        with self._lock:
            check(lib.er_live_session_new(self._handle(), out))
            member = self._members[self._key(lib.er_session_model(out[0]))]
            member.active += 1
            req._ptr = out[0]
        return member

    def _release(self, req):
        with self._lock:
            if req._ptr is None:
                return
            lib.er_session_free(req._ptr)   # may close a retired model
            req._ptr = None
            member = req._member
            member.active -= 1
            if member.retired and member.active == 0:
                self._prune(member)

    def generate(self, prompt, max_tokens=64, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 repeat_penalty=1.0, repeat_last_n=0, seed=None, stream=False, stop=None,
                 stop_at_eos=True, add_special=True):
        """As Model.generate, on the model current at the call. The session is
        taken at the call (BusyError when the current model has no free slot),
        so the prompt is tokenized by the very model that will run it; with
        stream=True it is held until the stream ends or is dropped."""
        req = _Request(self)
        try:
            text_mode, ids, stops = prepare(req._model, prompt, max_tokens, stop, add_special)
            params = sampling(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n)
            if seed is not None:
                Session.seed(req, seed)          # the same check of the seed as a Session's
        except BaseException:
            req.close()
            raise
        stats = {}
        ids_out = Session._run(req, ids, max_tokens, params, stop_at_eos, decode_last=False, stats=stats)
        # The request (and so perhaps a swapped-out model, and its vocabulary)
        # ends after the text: the last pieces are detokenized once the ids
        # have stopped, by that model's tokenizer.
        out = finish(req._model, ids_out, text_mode, stops, stream, stats)
        if not stream:
            req.close()
            return out

        def closing():
            try:
                yield from out
            finally:
                req.close()
        return closing()

    # ------------------------------------------------------------ facts
    def stats(self):
        """The handle's counters: generation (swaps so far), fingerprint of the
        current model, sessions_started, sessions_active, models_closed,
        models_open (current + swapped-out ones still serving requests)."""
        st = ffi.new("er_live_stats *")
        check(lib.er_live_stats_get(self._handle(), st))
        return {"generation": int(st.generation), "fingerprint": int(st.current_fingerprint),
                "sessions_started": int(st.sessions_started), "sessions_active": int(st.sessions_active),
                "models_closed": int(st.models_closed), "models_open": int(st.models_open)}

    @property
    def fingerprint(self):
        """er_model_fingerprint of the current model."""
        return self.stats()["fingerprint"]

    @property
    def model(self):
        """The current edgerun.Model (owned by the handle: do not keep it past
        a swap; its requests must go through this LiveModel)."""
        with self._lock:
            self._handle()
            return self._members[self._current].model

    # ------------------------------------------------------------ lifetime
    def close(self):
        """Closes the current model and the handle. BusyError while requests
        (including unfinished streams) are running."""
        if self._ptr is None:
            return
        with self._lock:
            check(lib.er_live_close(self._ptr))   # BusyError: requests still running
            self._ptr = None
            for member in list(self._members.values()):
                member.forget()
            self._members.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        if self._ptr is None:
            return "<edgerun.LiveModel closed>"
        st = self.stats()
        return f"<edgerun.LiveModel generation={st['generation']} requests_active={st['sessions_active']}>"
