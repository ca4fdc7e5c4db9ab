"""Chat on a model: the conversation rendered with the model's own chat
template, replies streamed until the vocabulary's end-of-turn token, and one
runtime session kept across turns so each turn prefills only what is new.

    with edgerun.Model("qwen.gguf") as m, m.chat_session(system="Be brief.") as chat:
        for piece in chat.send("What is GGUF?", stream=True):
            print(piece, end="", flush=True)
        chat.send("And GGML?")              # prefills the new turn only
        chat.save("talk.snap")              # talk.snap + talk.snap.chat.json

Each turn renders the WHOLE conversation (templates are free to render an
earlier turn differently once a later one exists: Qwen3 drops the reasoning of
past replies) and tokenizes it; the runtime session already holds the tokens of
the previous render plus the reply. The longest common prefix of the two stays
in the KV cache (er_session_truncate cuts the cache back to it when the new
render differs before its end); only the rest is prefilled. A reply goes into
the conversation as text and comes back through the template next turn, so
what the cache holds is always what the template would have produced.
"""
import copy
import os
import pathlib

from .. import errors
from .._ffi import check, lib
from ..session import check_max_tokens, stop_strings
from . import sidecar
from .model_info import encode_prompt, model_template, special_tokens, tokenizer_of
from .reply import Turn, sampling_params
from .template import compile_template, render

DEFAULT_MAX_TOKENS = 512
_ER_EUNSUPPORTED = -4


class ChatSession:
    """A conversation with a model on one runtime session (one of the model's
    n_sessions slots, held until close()). Use one thread at a time.

    system: a system prompt (the first message). chat_template: Jinja text
    (default: the file's). tools: JSON schemas the template may show the
    model. variables: further names the template reads (enable_thinking,
    date_string, ...). messages: a conversation to start from."""

    def __init__(self, model, system=None, chat_template=None, tools=None, variables=None, messages=None):
        self._session = None
        tokenizer_of(model)
        self.model = model
        self.template = model_template(model, chat_template)
        compile_template(self.template)            # a template that does not parse fails here
        self.tools = None if tools is None else copy.deepcopy(list(tools))
        self.variables = dict(variables or {})
        self._messages = []
        if system is not None:
            if not isinstance(system, str):
                raise errors.InvalidArgumentError(f"system must be text, got {type(system).__name__}", -1)
            self._messages.append({"role": "system", "content": system})
        if messages is not None:
            self._messages += [dict(m) for m in messages]
        self._session = model.session()            # BusyError when every slot is taken
        self.n_ctx = self._session.n_ctx
        self._cache = []                           # the ids the runtime session holds, in order
        self._known = True                         # False: the runtime moved its cache by itself
        self._open = None                          # a streamed turn not yet finished
        self.turn = {}                             # figures of the last turn
        self.totals = {"turns": 0, "prefilled": 0, "reused": 0, "generated": 0, "prefill_s": 0.0,
                       "decode_s": 0.0, "decoded": 0}

    # ------------------------------------------------------------ lifetime
    def close(self):
        self._settle()
        if self._session is not None:
            self._session.close()
            self._session = None

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
        if self._session is None:
            raise errors.StateError("the chat session is closed; start one with Model.chat_session()", -10)
        return self._session._live()

    def __repr__(self):
        return (f"<edgerun.chat.ChatSession of {self.model.path.name} {len(self._messages)} messages, "
                f"{len(self._cache)}/{self.n_ctx} tokens cached>")

    # ------------------------------------------------------------ the conversation
    @property
    def messages(self):
        """A copy of the conversation so far (a list of message dicts)."""
        return copy.deepcopy(self._messages)

    @property
    def cached_tokens(self):
        """The token ids the runtime session holds (a copy); None after the
        runtime rearranged its cache by itself (the next turn starts it over)."""
        return list(self._cache) if self._known else None

    def render(self, add_generation_prompt=True):
        """The conversation as the template writes it (what the model reads)."""
        return render(self.template, self._messages, add_generation_prompt=add_generation_prompt, tools=self.tools,
                      **{**special_tokens(self.model), **self.variables})

    def prompt_ids(self, add_generation_prompt=True):
        """The rendered conversation's token ids (encode_prompt)."""
        return encode_prompt(tokenizer_of(self.model), self.render(add_generation_prompt))

    def reset(self, system=None, keep_system=True):
        """Forgets the conversation (the system prompt stays unless keep_system
        is False or a new `system` is given). The KV cache is left as it is: the
        next turn keeps whatever prefix still matches (the system prompt)."""
        self._settle()
        old = self._messages[0] if self._messages and self._messages[0].get("role") == "system" else None
        self._messages = []
        if system is not None:
            self._messages.append({"role": "system", "content": system})
        elif keep_system and old is not None:
            self._messages.append(old)

    def send(self, content, **gen):
        """Adds a user message and returns the model's reply (text, or text
        pieces with stream=True). Keywords as reply()."""
        if not isinstance(content, str):
            raise errors.InvalidArgumentError(f"a message is text, got {type(content).__name__}", -1)
        return self._start({"role": "user", "content": content}, **gen)

    def reply(self, **gen):
        """The model's next message for the conversation as it stands.

        max_tokens (default 512), temperature, top_k, top_p, min_p,
        repeat_penalty, repeat_last_n, seed: as Model.generate. stop: strings
        that end the reply (not included). stream=True gives text pieces as
        they come. The reply stops at an end-of-turn token, max_tokens, a stop
        string, or a full context (self.turn["stopped"] says which), and is
        appended to the conversation; a streamed reply abandoned half way
        (close(), Ctrl-C) is appended as far as it came."""
        return self._start(None, **gen)

    def _start(self, message, max_tokens=DEFAULT_MAX_TOKENS, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
               repeat_penalty=1.0, repeat_last_n=0, seed=None, stop=None, stream=False):
        self._live()
        self._settle()
        check_max_tokens(max_tokens)
        params = sampling_params(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n)
        stops = stop_strings(stop)
        if message is not None:
            self._messages.append(message)
        try:
            ids = self.prompt_ids()
            if not ids:
                raise errors.ChatTemplateError("the chat template rendered the conversation as no text at all; "
                                               "there is nothing for the model to reply to")
            if len(ids) >= self.n_ctx and self.model.ctx_strategy == "fail":
                raise errors.ContextFullError(
                    f"the conversation is {len(ids)} tokens and the context holds {self.n_ctx}, with no room for a "
                    "reply; reset() it (/reset), or open the model with a larger n_ctx (--ctx)", -7)
            if seed is not None:
                self._session.seed(seed)
        except BaseException:
            if message is not None:
                self._messages.pop()
            raise
        turn = Turn(self, ids, max_tokens, params, stops, pushed=message is not None)
        if stream:
            self._open = turn
            return turn.pieces()
        return "".join(turn.pieces())

    def _settle(self):
        """Ends a streamed turn that was left open (never iterated, or not to
        its end), so its effect on the conversation is decided before anything
        else happens."""
        t, self._open = self._open, None
        if t is not None:
            t.abandon()

    # ------------------------------------------------------------ the cache
    def _forget_if_moved(self):
        """After the runtime rearranged its cache by itself (a context that
        slides when full), which ids it holds is not known here: start the
        cache over rather than reuse a prefix that is not there."""
        if not self._known:
            check(lib.er_session_reset(self._live()))
            self._cache = []
            self._known = True

    def _rewind(self, keep):
        """Makes the runtime session hold exactly self._cache[:keep]."""
        if keep >= len(self._cache):
            return
        rc = lib.er_session_truncate(self._live(), keep)
        if rc == _ER_EUNSUPPORTED:
            # A cache that cannot be cut (a future family's recurrent state):
            # start over; correct, only slower.
            check(lib.er_session_reset(self._live()))
            keep = 0
        else:
            check(rc)
        del self._cache[keep:]

    def _sync(self):
        """Brings the id mirror in line with the runtime after an interruption:
        ids are recorded before each er_decode, so the runtime holds at most
        what the mirror says, and its position says how much of it."""
        if self._session is None or self._session._ptr not in self.model._sessions or not self._known:
            return
        pos = self._session.pos
        if pos < len(self._cache):
            del self._cache[pos:]
        elif pos > len(self._cache):
            rc = lib.er_session_truncate(self._live(), len(self._cache))
            if rc == _ER_EUNSUPPORTED:   # a ring or convolution state that cannot be cut back
                check(lib.er_session_reset(self._live()))
                self._cache = []
            else:
                check(rc)

    # ------------------------------------------------------------ figures
    def stats(self):
        """Conversation and cache figures: turns, tokens cached and n_ctx,
        tokens prefilled / reused from the cache / generated in all, prefill
        and decode speed, and the last turn's figures."""
        t = self.totals
        pos = self._session.pos if self._session is not None else len(self._cache)
        return {"turns": t["turns"], "messages": len(self._messages), "cache_tokens": pos, "n_ctx": self.n_ctx,
                "cache_use": pos / self.n_ctx if self.n_ctx else 0.0, "prefilled": t["prefilled"],
                "reused": t["reused"], "generated": t["generated"],
                "prefill_tokens_per_s": t["prefilled"] / t["prefill_s"] if t["prefill_s"] else 0.0,
                "decode_tokens_per_s": t["decoded"] / t["decode_s"] if t["decode_s"] else 0.0,
                "last_turn": dict(self.turn)}

    # ------------------------------------------------------------ snapshots
    def save(self, path):
        """Writes the runtime session to `path` (er_session_save: atomic) and
        the conversation beside it, to `path` + ".chat.json" (atomic too; it
        names the snapshot's SHA-256, so a pair from two different saves is
        refused on load)."""
        self._settle()
        path = pathlib.Path(os.fspath(path))
        self._sync()
        self._forget_if_moved()
        doc = {"format": sidecar.FORMAT, "version": sidecar.VERSION,
               "model_fingerprint": f"{self.model.fingerprint:016x}", "snapshot_sha256": None,
               "template": self.template, "variables": self.variables, "tools": self.tools,
               "messages": self._messages, "tokens": self._cache, "totals": self.totals}
        sidecar.encode(doc)     # a value JSON cannot hold fails here, before the snapshot is written
        self._session.save(path)
        doc["snapshot_sha256"] = sidecar.sha256(path)
        sidecar.write(sidecar.path_of(path), doc)

    def load(self, path):
        """Replaces the conversation and the runtime session with a save()d
        pair. Refused, with the session unchanged: MismatchError (another
        model), CorruptModelError (a damaged file, snapshot and conversation
        from different saves, a conversation its template cannot render),
        FileAccessError (a file missing). One case leaves the session empty
        instead: a conversation whose token count differs from the snapshot
        it names by checksum, which only an edited file gives."""
        self._settle()
        path = pathlib.Path(os.fspath(path))
        side = sidecar.path_of(path)
        try:
            raw = side.read_bytes()
        except FileNotFoundError:
            raise errors.FileAccessError(
                f"{side}: no such file; a chat is saved as two files, the snapshot and its conversation "
                f"(FILE{sidecar.SUFFIX}), by ChatSession.save / /save", -2) from None
        except OSError as e:
            raise errors.FileAccessError(f"{side}: {e.strerror or e}", -2) from None
        doc = sidecar.parse(raw, side)
        if doc["model_fingerprint"] != f"{self.model.fingerprint:016x}":
            raise errors.MismatchError(
                f"{path} is a chat with another model (fingerprint {doc['model_fingerprint']}, this one "
                f"{self.model.fingerprint:016x}); load it with the model that saved it", -11)
        if any(t >= self.model.n_vocab for t in doc["tokens"]):
            raise errors.CorruptModelError(f"{side}: a token id is out of range for a vocabulary of "
                                           f"{self.model.n_vocab}", -3)
        try:
            digest = sidecar.sha256(path)
        except FileNotFoundError:
            raise errors.FileAccessError(f"{path}: no such file (the conversation is there, its snapshot is not)",
                                         -2) from None
        if digest != doc["snapshot_sha256"]:
            raise errors.CorruptModelError(
                f"{path} is not the snapshot {side.name} was saved with (SHA-256 differs): the pair comes from two "
                "different saves", -3)
        # the conversation must render with its own template and variables
        # before anything of this chat changes: a file that loads and then
        # fails at every send() is worse than one refused here
        try:
            render(doc["template"], doc["messages"], add_generation_prompt=False, tools=doc["tools"],
                   **{**special_tokens(self.model), **doc["variables"]})
        except (errors.ChatTemplateError, errors.InvalidArgumentError, TypeError) as e:
            raise errors.CorruptModelError(f"{side}: its conversation does not render with its template ({e})",
                                           -3) from None
        self._session.load(path)
        if self._session.pos != len(doc["tokens"]):
            check(lib.er_session_reset(self._live()))
            self._cache = []
            raise errors.CorruptModelError(
                f"{path} holds {self._session.pos} tokens, its conversation says {len(doc['tokens'])}", -3)
        self.template = doc["template"]
        self.variables = dict(doc["variables"])
        self.tools = doc["tools"]
        self._messages = doc["messages"]
        self._cache = list(doc["tokens"])
        self._known = True
        saved = doc.get("totals", {})
        self.totals.update({k: saved[k] for k in self.totals
                            if isinstance(saved.get(k), (int, float)) and not isinstance(saved.get(k), bool)})
        self.turn = {}


def chat(model, messages, chat_template=None, tools=None, variables=None, stream=False, **gen):
    """The model's reply to `messages` (text, or text pieces with stream=True)
    on a session of its own, as Model.generate runs on one: keywords as
    ChatSession.reply. With stream=True the session slot is taken at the first
    piece and given back when the stream ends; template and argument mistakes
    raise at the call."""
    chat_template = model_template(model, chat_template)
    # Everything that can be checked without a session is, now: a stream's
    # first error should not wait for its first iteration.
    render(chat_template, messages, tools=tools, **{**special_tokens(model), **(variables or {})})
    if not stream:
        with ChatSession(model, chat_template=chat_template, tools=tools, variables=variables,
                         messages=messages) as cs:
            return cs.reply(**gen)

    def run():
        with ChatSession(model, chat_template=chat_template, tools=tools, variables=variables,
                         messages=messages) as cs:
            yield from cs.reply(stream=True, **gen)
    return run()
