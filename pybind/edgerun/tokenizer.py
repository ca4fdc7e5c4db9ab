"""The runtime's tokenizer from Python.

    tok = edgerun.Tokenizer.from_file("model.gguf")     # vocabulary only: no weights loaded
    ids = tok.encode("Hello world")                     # BOS/EOS as the file says
    text = tok.decode(ids, skip_special=True)
    dec = tok.stream_decoder()                          # per-token text, UTF-8 safe
    pieces = [dec.feed(i) for i in ids] + [dec.flush()]

A loaded edgerun.Model exposes the same object as ``model.tokenizer``.

The C side is stateless (every call brings its own scratch), so one Tokenizer
may be used from any number of threads; ``encode_batch`` does exactly that.
Each thread keeps its own scratch and output buffers per Tokenizer, so a call
allocates nothing: what a short call costs is one C call and the list of ids.
"""
from __future__ import annotations

import os
import pathlib
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from . import errors
from ._ffi import ffi, lib, check

def _id32(id):
    """A token id as the C side takes it (int32); past that range no id exists."""
    v = int(id)
    if not -2**31 <= v < 2**31:
        raise errors.InvalidArgumentError(f"token id {v} is out of range", -1)
    return v


# Scratch and output buffers are overwritten by the C side: skip cffi's zeroing.
_alloc = ffi.new_allocator(should_clear_after_alloc=False)

_KINDS = {1: "spm", 2: "bpe"}

# Inputs up to this many bytes use the thread's kept buffers (whose scratch
# grows to ~3.6 MiB at this size, er_tokenize_scratch_bytes); a longer one gets
# buffers for that call only, so one huge text does not pin its scratch for good.
KEEP_BYTES = 64 * 1024
_ERANGE = -9


# Looked up once: encode() is short enough that attribute lookups show.
_er_tokenize = lib.er_tokenize
_unpack = ffi.unpack
_NO_BUFFERS = (-1, None, 0, None, None, 0)


def _buffers(vocab, n):
    """(input bytes they fit, ids, ids capacity, n_out, scratch, scratch bytes):
    er_tokenize's buffers for texts up to the next power of two >= n."""
    cap = 64
    while cap < n:
        cap *= 2
    scratch_n = lib.er_tokenize_scratch_bytes(vocab, cap)
    return cap, _alloc("int32_t[]", cap + 8), cap + 8, ffi.new("size_t *"), _alloc("char[]", scratch_n), scratch_n


class _OpenedModel:
    """Owns an er_model opened vocab-only; closes it when the last user goes."""

    def __init__(self, path):
        opts = ffi.new("er_options *")
        check(lib.er_options_default(opts))
        opts.vocab_only = 1
        pp = ffi.new("er_model **")
        check(lib.er_model_open(os.fsencode(path), opts, pp))
        self.ptr = pp[0]
        self._finalizer = weakref.finalize(self, lib.er_model_close, self.ptr)

    def close(self):
        self._finalizer()


def _numpy_ids(ids, n):
    import numpy as np
    return np.frombuffer(ffi.buffer(ids, 4 * n), dtype=np.int32).copy()


def _to_bytes(text):
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    if not isinstance(text, str):
        raise TypeError(f"text must be str or bytes, not {type(text).__name__}")
    return text.encode("utf-8")


class Tokenizer:
    """A GGUF file's tokenizer (SentencePiece BPE or byte-level BPE)."""

    def __init__(self, *_a, **_k):
        raise TypeError("use Tokenizer.from_file(path) or Model(...).tokenizer")

    @classmethod
    def from_file(cls, path) -> "Tokenizer":
        """Opens only the vocabulary of a GGUF file (er_options.vocab_only)."""
        owner = _OpenedModel(pathlib.Path(path))
        vocab = lib.er_model_vocab(owner.ptr)
        if vocab == ffi.NULL:  # er_model_open refuses this already; kept for clarity
            owner.close()
            raise ValueError(f"{path} has no tokenizer")
        return cls._from_vocab(vocab, owner)

    @classmethod
    def _from_vocab(cls, vocab_ptr, owner) -> "Tokenizer":
        """Wraps an er_vocab owned by `owner` (kept alive as long as this object)."""
        self = object.__new__(cls)
        self._v = vocab_ptr
        self._owner = owner
        self.n_vocab = int(lib.er_vocab_n_tokens(vocab_ptr))
        self.kind = _KINDS.get(int(lib.er_vocab_kind(vocab_ptr)), "none")
        self.pre = ffi.string(lib.er_vocab_pre(vocab_ptr)).decode()
        b, e = int(lib.er_vocab_bos(vocab_ptr)), int(lib.er_vocab_eos(vocab_ptr))
        self.bos = b if b >= 0 else None
        self.eos = e if e >= 0 else None
        self._tls = threading.local()     # .b: this thread's _buffers()
        return self

    def __repr__(self):
        return f"<edgerun.Tokenizer {self.kind} pre={self.pre} n_vocab={self.n_vocab}>"

    def close(self):
        """Releases a file opened by from_file (a no-op for model.tokenizer,
        which lives as long as its model: `with m.tokenizer as t:` must not
        take the model's text API with it)."""
        if isinstance(self._owner, _OpenedModel):
            self._owner.close()
            self._v = None

    def _invalidate(self):
        """The vocabulary's memory is gone (its model closed, or swapped out
        of a LiveModel): later calls raise instead of reading freed memory."""
        self._v = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _vocab(self):
        if self._v is None:
            raise errors.StateError("the tokenizer is closed, or the model it came from is; "
                                    "take it from an open model (or Tokenizer.from_file)", -10)
        return self._v

    # ---- encoding -----------------------------------------------------------

    def encode(self, text, add_special: bool = True, parse_special: bool = False, *, as_numpy: bool = False):
        """Token ids of `text` (str, or UTF-8 bytes), as a list (or, with
        as_numpy, a new int32 numpy array: no Python int per id).

        add_special: BOS/EOS as the file's add_bos_token/add_eos_token say.
        parse_special: match control tokens written in the text ("<|im_end|>");
        user-defined added tokens are always matched, as Hugging Face does.
        """
        # The common call kept short: every line here is paid per call.
        data = text.encode() if type(text) is str else _to_bytes(text)
        n = len(data)
        cap, ids, ids_cap, n_out, scratch, scratch_n = getattr(self._tls, "b", _NO_BUFFERS)
        v = self._v
        if n <= cap and v is not None:
            rc = _er_tokenize(v, data, n, (1 if add_special else 0) | (2 if parse_special else 0),
                              ids, ids_cap, n_out, scratch, scratch_n)
            if rc >= 0:
                return _numpy_ids(ids, n_out[0]) if as_numpy else _unpack(ids, n_out[0])
            if rc != _ERANGE:
                check(rc)
        return self._encode_slow(data, add_special, parse_special, as_numpy)

    def _encode_slow(self, data, add_special, parse_special, as_numpy):
        """First call on a thread, a longer text than before, more ids than the
        kept buffer holds, or a closed tokenizer."""
        v = self._vocab()
        n = len(data)
        if n <= KEEP_BYTES:
            b = getattr(self._tls, "b", _NO_BUFFERS)
            if n > b[0]:
                b = self._tls.b = _buffers(v, n)
            out = self._encode_into(v, data, add_special, parse_special, b[4], b[5])
        else:
            scratch_n = lib.er_tokenize_scratch_bytes(v, n)
            out = self._encode_into(v, data, add_special, parse_special, _alloc("char[]", scratch_n), scratch_n)
        return _numpy_ids(*out) if as_numpy else ffi.unpack(*out)

    @staticmethod
    def _encode_into(v, data, add_special, parse_special, scratch, scratch_n):
        """(ids buffer, count) for one call with its own output buffer."""
        n = len(data)
        flags = (1 if add_special else 0) | (2 if parse_special else 0)
        n_out = ffi.new("size_t *")
        cap = n + 8
        for _ in range(2):
            ids = _alloc("int32_t[]", cap)
            rc = lib.er_tokenize(v, data, n, flags, ids, cap, n_out, scratch, scratch_n)
            if rc == _ERANGE and n_out[0] > cap:  # retry with the size it asked for
                cap = n_out[0]
                continue
            check(rc)
            return ids, n_out[0]
        check(rc)
        raise AssertionError("unreachable")

    def encode_batch(self, texts, add_special: bool = True, parse_special: bool = False,
                     num_threads: int | None = None) -> list[list[int]]:
        """encode() over many texts on a thread pool (the C calls release the GIL)."""
        texts = list(texts)
        workers = num_threads or min(8, os.cpu_count() or 1)
        if workers <= 1 or len(texts) <= 1:
            return [self.encode(t, add_special, parse_special) for t in texts]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda t: self.encode(t, add_special, parse_special), texts))

    # ---- decoding -----------------------------------------------------------

    def decode(self, ids, skip_special: bool = False) -> str:
        """Text of `ids` as Hugging Face's decode gives it (invalid UTF-8 -> U+FFFD)."""
        return self.decode_bytes(ids, skip_special).decode("utf-8", "replace")

    def decode_bytes(self, ids, skip_special: bool = False) -> bytes:
        v = self._vocab()
        ids = [int(i) for i in ids]
        try:
            arr = ffi.new("int32_t[]", ids) if ids else ffi.NULL
        except (OverflowError, TypeError) as e:    # an id past int32, or not an integer
            raise errors.InvalidArgumentError(f"token ids must be integers in the vocabulary: {e}", -1) from None
        n_out = ffi.new("size_t *")
        cap = 8 * len(ids) + 16
        for _ in range(2):
            out = _alloc("char[]", cap)
            rc = lib.er_detokenize(v, arr, len(ids), 1 if skip_special else 0, out, cap, n_out)
            if rc == -9 and n_out[0] >= cap:
                cap = n_out[0] + 1
                continue
            check(rc)
            return ffi.unpack(out, n_out[0])
        check(rc)
        raise AssertionError("unreachable")

    def piece(self, id: int) -> str:
        """The token's text as stored in the file ("▁Hello", "Ġworld", "<0x0A>")."""
        p = lib.er_vocab_token_text(self._vocab(), _id32(id))
        if p == ffi.NULL:
            raise IndexError(f"token id {id} is out of range for a vocabulary of {self.n_vocab}")
        return ffi.string(p).decode("utf-8", "replace")

    def is_eog(self, id: int) -> bool:
        """True for end-of-generation ids (EOS, EOT, <|im_end|>, ...)."""
        return bool(lib.er_vocab_is_eog(self._vocab(), _id32(id)))

    def stream_decoder(self) -> "StreamDecoder":
        return StreamDecoder(self)


class StreamDecoder:
    """Text per token as it arrives; bytes of an unfinished UTF-8 character are
    held until the token that completes it (er_detok_step)."""

    def __init__(self, tok: Tokenizer):
        self._tok = tok
        self._state = ffi.new("er_detok_state *")
        self._n = ffi.new("size_t *")
        self._cap = 256
        self._buf = _alloc("char[]", self._cap)

    def feed(self, id: int) -> str:
        v = self._tok._vocab()
        rc = lib.er_detok_step(v, self._state, int(id), self._buf, self._cap, self._n)
        if rc == -9:  # ER_ERANGE: the state is unchanged; grow and redo
            self._cap = self._n[0] + 256
            self._buf = _alloc("char[]", self._cap)
            rc = lib.er_detok_step(v, self._state, int(id), self._buf, self._cap, self._n)
        check(rc)
        return ffi.unpack(self._buf, self._n[0]).decode("utf-8", "replace")

    def flush(self) -> str:
        check(lib.er_detok_flush(self._tok._vocab(), self._state, self._buf, self._cap, self._n))
        return ffi.unpack(self._buf, self._n[0]).decode("utf-8", "replace")

    def reset(self):
        self._state = ffi.new("er_detok_state *")
