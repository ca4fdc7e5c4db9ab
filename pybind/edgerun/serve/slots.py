"""A slot: one runtime session (one of the model's n_sessions, taken when the
server starts and held until it stops) and the ids its KV cache holds.

A slot keeps its cache after a request ends. The next request on it prefills
only what differs from that cache: a chat client sends the whole
conversation again each turn, and all of it up to the new message is already
there. The scheduler gives a new request the free slot whose cache shares the
longest prefix with it."""
from .binding import ER_EUNSUPPORTED, can_truncate, check, lib


def common_prefix(a, b):
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Slot:
    def __init__(self, model, index):
        self.index = index
        self.session = model.session()      # BusyError when the model has fewer sessions than slots
        self.n_ctx = self.session.n_ctx
        self.cache = []                     # ids in the KV cache, in order
        self.job = None
        self.last_used = 0.0
        self._truncate = can_truncate()

    @property
    def ptr(self):
        return self.session._ptr

    def reusable(self, ids):
        """How many leading ids of a prompt this slot would not prefill again."""
        keep = common_prefix(self.cache, ids)
        if keep == len(ids):
            keep -= 1            # the last prompt token runs again: its logits start the reply
        if keep < len(self.cache) and not self._truncate:
            return 0
        return max(keep, 0)

    def rewind_for(self, ids):
        """Cuts the cache back to what `ids` can reuse; returns the ids still
        to prefill."""
        keep = self.reusable(ids)
        if keep < len(self.cache):
            rc = lib.er_session_truncate(self.ptr, keep) if self._truncate and keep > 0 else ER_EUNSUPPORTED
            if rc == ER_EUNSUPPORTED:
                # No truncate in this library (or a cache that cannot be cut):
                # start the session over; correct, only slower.
                check(lib.er_session_reset(self.ptr))
                keep = 0
            else:
                check(rc)
            del self.cache[keep:]
        return list(ids[keep:])

    def clear(self):
        """After a failed step the cache content is unknown: start over."""
        check(lib.er_session_reset(self.ptr))
        self.cache = []

    def close(self):
        self.session.close()
