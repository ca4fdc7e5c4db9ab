"""Generated ids -> text pieces for one request: the streaming detokenizer
(a UTF-8 character split across tokens comes out whole) and the stop strings
(a reply ends before the first one; text that could still grow into one is
held back, so a stream never shows the start of a stop string: the rule
a chat turn uses, edgerun.chat's StopCut)."""
from ..chat.reply import StopCut


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
