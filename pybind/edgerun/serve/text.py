"""Generated ids -> text pieces for one request: the streaming detokenizer
(a UTF-8 character split across tokens comes out whole) and the stop strings
(a reply ends before the first one; text that could still grow into one is
held back, so a stream never shows the start of a stop string)."""


class StopCut:
    def __init__(self, stops):
        self.stops = [s for s in stops if s]
        self.pending = ""

    def feed(self, piece):
        """(text safe to send now, True when a stop string appeared)."""
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


class TextOut:
    """Pieces of one reply. continuing=True (completions): the text continues
    the prompt, so the first token keeps its leading space (SentencePiece
    drops it only at the start of a text) and prompt + completion read as
    the whole. continuing=False (chat): the reply is a message of its own and
    starts as `edgerun chat` starts it."""

    def __init__(self, tokenizer, stops, continuing=True):
        self.dec = tokenizer.stream_decoder()
        if continuing:
            self.dec._state.n_emitted = 1
        self.cut = StopCut(stops)

    def feed(self, token):
        return self.cut.feed(self.dec.feed(token))

    def flush(self):
        """The held-back tail at the end of the reply: (text, stop hit)."""
        out, hit = self.cut.feed(self.dec.flush())
        if hit:
            return out, True
        out += self.cut.pending
        self.cut.pending = ""
        return out, False
