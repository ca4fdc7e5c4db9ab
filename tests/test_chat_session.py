"""Chat on a model (edgerun.chat.ChatSession, Model.chat, Model.chat_session).

The model is a tiny Qwen2 trained in the test to answer a few messages in
ChatML and end its turn with <|im_end|> (chat_helpers.py), with the template in
its GGUF. transformers on the same weights is the reference for the prompt ids
and the greedy replies. The prefix reuse is counted twice: by our figures and
by the runtime's own (er_stats.n_prefill_tokens).
"""
import json

import numpy as np
import pytest

import edgerun
from edgerun import errors
from edgerun._ffi import check, ffi, lib
from edgerun.chat import ChatSession, common_prefix, end_of_turn_ids, sidecar_path

from chat_helpers import ANSWERS, CHATML, Reference, chat_model_path

pytest.importorskip("transformers")
pytest.importorskip("torch")

TRAINED = ["hello", "how are you", "bye", "what is red", "count"]     # an order the model learned


@pytest.fixture(scope="module")
def chat_gguf(tmp_path_factory):
    return chat_model_path(tmp_path_factory)


@pytest.fixture(scope="module")
def ref(chat_gguf):
    return Reference(chat_gguf)


@pytest.fixture
def model(chat_gguf):
    with edgerun.Model(chat_gguf, n_ctx=256, n_sessions=2) as m:
        yield m


def _user(q):
    return {"role": "user", "content": q}


def test_template_comes_from_the_file_and_ids_match_transformers(model, ref):
    from edgerun.chat import read_string
    assert read_string(model.path, "tokenizer.chat_template") == CHATML
    convs = [[_user("hello")],
             [{"role": "system", "content": "be kind"}, _user("hello"), {"role": "assistant", "content": "hi there"},
              _user("héllo 日本 <|im_end|> as text?")],
             [_user("")]]
    for msgs in convs:
        with ChatSession(model, messages=msgs) as c:
            assert c.prompt_ids() == ref.prompt_ids(msgs)


def test_end_of_turn_ids_are_the_vocab_marks(model):
    tok = model.tokenizer
    ids = {tok.piece(i): i for i in range(tok.n_vocab) if tok.piece(i).startswith("<|")}
    eot = end_of_turn_ids(model)
    assert ids["<|im_end|>"] in eot and ids["<|endoftext|>"] in eot
    assert ids["<|im_start|>"] not in eot


def test_one_shot_chat_matches_transformers_and_stops_at_end_of_turn(model, ref):
    msgs = [{"role": "system", "content": "be kind"}, _user("hello")]
    out = model.chat(msgs)
    assert out == ref.reply(msgs) == "hi there"
    st = model.stats()
    assert st["stopped"] == "eos" and st["n_prefilled"] == st["n_prompt"] and st["n_reused"] == 0
    pieces = list(model.chat(msgs, stream=True))
    assert len(pieces) >= 2 and "".join(pieces) == out
    assert model.chat([_user("count")], max_tokens=1) == "one"
    assert model.stats()["stopped"] == "max_tokens"
    assert model.chat(msgs, stop=["ere"]) == "hi th"
    assert model.stats()["stopped"] == "stop"


def test_turns_prefill_only_what_is_new(model, ref):
    with model.chat_session(system="be kind") as c:
        runtime_before = c._session.stats()["n_prefill_tokens"]
        for k, q in enumerate(TRAINED):
            cached = c.cached_tokens
            reply = c.send(q)
            assert reply == ANSWERS[q]
            assert reply == ref.reply(c.messages[:-1])          # the whole conversation, nothing cached
            ids = ref.prompt_ids(c.messages[:-1])
            t = c.turn
            assert t["stopped"] == "eos" and t["n_prompt"] == len(ids)
            # the reply came back through the template as the same tokens: the whole cache is reused
            assert common_prefix(cached, ids) == len(cached)
            assert t["n_reused"] == len(cached) and t["n_prefilled"] == len(ids) - len(cached)
            if k:
                assert t["n_prefilled"] < len(ids) // 2
            runtime = c._session.stats()["n_prefill_tokens"]
            assert runtime - runtime_before == t["n_prefilled"]       # the runtime's own count
            runtime_before = runtime
            assert c.cached_tokens == ids + ref.tok(reply, add_special_tokens=False)["input_ids"]
            assert c._session.pos == len(c.cached_tokens)
        assert [m["role"] for m in c.messages] == ["system"] + ["user", "assistant"] * len(TRAINED)
        s = c.stats()
        assert s["turns"] == len(TRAINED) and s["cache_tokens"] == c._session.pos
        assert s["reused"] > s["prefilled"] > 0 and s["generated"] > 0 and 0 < s["cache_use"] < 1


def test_a_differing_render_cuts_the_cache_back(model, ref):
    # Past replies rendered in capitals: the cache holds the reply as generated,
    # so the next render differs from where that reply starts.
    shouting = CHATML.replace("message['content']", "(message['content'] | upper if not loop.last and "
                                                     "message['role'] == 'assistant' else message['content'])")
    with model.chat_session(chat_template=shouting) as c:
        c.send("hello")
        first_prompt = len(ref.prompt_ids([_user("hello")], shouting))
        cached = c.cached_tokens
        reply = c.send("how are you")
        ids = ref.prompt_ids(c.messages[:-1], shouting)
        keep = common_prefix(cached, ids)
        assert keep == first_prompt < len(cached)
        assert c.turn["n_reused"] == keep and c.turn["n_prefilled"] == len(ids) - keep
        assert reply == ref.reply(c.messages[:-1], template=shouting)
        # and /reset: only the system prompt's tokens can still match
    with model.chat_session(system="be kind") as c:
        c.send("hello")
        c.send("how are you")
        c.reset()
        assert c.messages == [{"role": "system", "content": "be kind"}]
        cached = c.cached_tokens
        reply = c.send("bye")
        assert reply == ref.reply(c.messages[:-1])
        ids = ref.prompt_ids(c.messages[:-1])
        keep = common_prefix(cached, ids)           # the system prompt and the user turn's opening
        assert 0 < keep < len(ref.prompt_ids([{"role": "system", "content": "be kind"}, _user("hello")]))
        assert c.turn["n_reused"] == keep and c.turn["n_prefilled"] == len(ids) - keep
        # the same conversation again: everything is cached but the last prompt
        # token, which runs again for the logits the reply starts from
        c.reset()
        c.send("bye")
        assert c.turn["n_reused"] == len(ids) - 1 and c.turn["n_prefilled"] == 1
        assert c.messages[-1]["content"] == reply


def test_truncate_keeps_a_prefix_exactly(model):
    ids = model.tokenizer.encode("<|im_start|>user\nhello<|im_end|>\n", add_special=False, parse_special=True)
    other = model.tokenizer.encode("the cat sat", add_special=False)
    with model.session() as s, model.session() as fresh:
        s.decode(ids)
        check(lib.er_session_truncate(s._live(), 4))
        assert s.pos == 4
        with pytest.raises(errors.StateError):
            s.sample()                                   # the logits went with the cut tokens
        got = s.decode(other)
        want = fresh.decode(ids[:4] + other)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        for bad in (-1, s.pos + 1):
            with pytest.raises(errors.InvalidArgumentError):
                check(lib.er_session_truncate(s._live(), bad))
        check(lib.er_session_truncate(s._live(), s.pos))  # n == pos: nothing changes
        assert s.pos == 4 + len(other)
        s.sample()
    assert lib.er_session_truncate(ffi.NULL, 0) == errors.InvalidArgumentError.status


def test_streams_settle_the_conversation(model, ref):
    with model.chat_session() as c:
        gen = c.send("count", stream=True)
        first = next(gen)
        gen.close()                                       # stopped half way (Ctrl-C in the terminal)
        assert c.messages == [_user("count"), {"role": "assistant", "content": first}]
        assert c.turn["stopped"] == "interrupted"
        assert c._session.pos == len(c.cached_tokens)
        c.send("hello", stream=True)                      # never iterated: takes its message back out
        reply = c.send("how are you")
        assert [m["content"] for m in c.messages if m["role"] == "user"] == ["count", "how are you"]
        assert reply == ref.reply(c.messages[:-1])
        assert c._session.pos == len(c.cached_tokens)


def test_a_cache_moved_behind_its_back_is_started_over(model, ref):
    """When the runtime holds other tokens than the chat recorded (a context
    that slid when full, or a direct use of the session), nothing is reused."""
    with model.chat_session() as c:
        c.send("hello")
        c._session.decode([5, 6, 7])
        reply = c.send("how are you")
        assert reply == ref.reply(c.messages[:-1])
        assert c.turn["n_reused"] == 0 and c.turn["n_prefilled"] == c.turn["n_prompt"]
        assert c._session.pos == len(c.cached_tokens)


def test_save_and_load_with_the_conversation(model, chat_gguf, ref, tmp_path):
    snap = tmp_path / "talk.snap"
    with model.chat_session(system="be kind") as a:
        a.send("hello")
        a.send("how are you")
        a.save(snap)
        assert snap.exists() and sidecar_path(snap).exists()
        doc = json.loads(sidecar_path(snap).read_text())
        assert doc["messages"] == a.messages and doc["tokens"] == a.cached_tokens
        want = a.send("bye")
        want_turn = dict(a.turn)
        a.save(tmp_path / "later.snap")
    with edgerun.Model(chat_gguf, n_ctx=256) as m2, m2.chat_session() as b:
        b.load(snap)
        assert b.messages[0] == {"role": "system", "content": "be kind"} and len(b.messages) == 5
        got = b.send("bye")
        assert got == want == "see you later"
        assert b.turn["n_reused"] == want_turn["n_reused"] and b.turn["n_prefilled"] == want_turn["n_prefilled"]
        before = b.messages
        # a pair from two saves, a missing half, a damaged conversation: refused, nothing changed
        sidecar_path(snap).write_bytes(sidecar_path(tmp_path / "later.snap").read_bytes())
        with pytest.raises(errors.CorruptModelError, match="different saves"):
            b.load(snap)
        with pytest.raises(errors.FileAccessError, match="chat.json"):
            b.load(tmp_path / "nothing.snap")
        sidecar_path(snap).write_text("{not json")
        with pytest.raises(errors.CorruptModelError):
            b.load(snap)
        assert b.messages == before
    with edgerun.Model() as m4, m4.chat_session(chat_template=CHATML) as d:     # another model
        with pytest.raises(errors.MismatchError, match="another model"):
            d.load(tmp_path / "later.snap")
        assert d.messages == []


def test_no_template_says_how_to_pass_one(chat_gguf, ref):
    with edgerun.Model() as m:                         # the embedded default model has none
        with pytest.raises(errors.ChatTemplateError, match="--chat-template FILE.*|chat_template=TEXT"):
            m.chat([_user("hi")])
        with pytest.raises(errors.ChatTemplateError, match="chat_template=TEXT"):
            m.chat_session()
    with edgerun.Model(chat_gguf.parent / "chat-plain.gguf", n_ctx=256) as m:
        with pytest.raises(errors.ChatTemplateError):
            m.chat([_user("hello")])
        assert m.chat([_user("hello")], chat_template=CHATML) == ref.reply([_user("hello")])
        with pytest.raises(errors.ChatTemplateError, match="does not parse"):
            m.chat_session(chat_template="{% if %}")
        with pytest.raises(errors.ChatTemplateError, match="no text at all"):
            m.chat([_user("hello")], chat_template="{% if false %}x{% endif %}")
        with pytest.raises(errors.ChatTemplateError, match="nope"):
            m.chat([_user("hello")], chat_template="{{ raise_exception('nope') }}")


def test_context_limits(chat_gguf):
    with edgerun.Model(chat_gguf, n_ctx=24) as m, m.chat_session() as c:
        with pytest.raises(errors.ContextFullError, match="reset"):
            c.send("the cat sat on a mat " * 4)
        assert c.messages == [] and c.cached_tokens == []
        out = c.send("count", max_tokens=100)
        assert c.turn["stopped"] in ("eos", "context")
        ids_len = c.turn["n_prompt"]
        if c.turn["stopped"] == "context":
            assert ids_len + c.turn["n_generated"] >= m.n_ctx
        assert out.startswith("one")
        assert c._session.pos == len(c.cached_tokens) <= m.n_ctx


def test_bad_arguments(model):
    with model.chat_session() as c:
        for kw in ({"max_tokens": -1}, {"max_tokens": 1.5}, {"temperature": "hot"}):
            with pytest.raises(errors.InvalidArgumentError):
                c.send("hello", **kw)
        assert c.messages == []
        with pytest.raises(errors.InvalidArgumentError):
            c.send(["hello"])
        with pytest.raises(errors.BusyError):
            model.session(), model.session()
    with pytest.raises(errors.StateError):
        c.send("hello")


@pytest.mark.parametrize("strategy", ["slide", "slide_prefill"])
def test_a_sliding_context_keeps_the_conversation_going(chat_gguf, ref, strategy):
    """A conversation to over 5x n_ctx on a context that slides: every turn
    answers, the id mirror follows the runtime's shifted history (no start
    over), and the turn after a slide reuses the kept start (the system
    prompt) instead of prefilling from nothing."""
    system = "be kind"
    a, b = (ref.prompt_ids([{"role": "system", "content": system}, _user(q)]) for q in ("hello", "bye"))
    head = a[:common_prefix(a, b)]        # the system turn, and what starts the user's
    keep = len(head)
    with edgerun.Model(chat_gguf, n_ctx=64, ctx_strategy=strategy, ctx_keep=keep) as m, \
            m.chat_session(system=system) as c:
        total, slid = 0, 0
        for k in range(30):
            q = TRAINED[k % len(TRAINED)]
            before = c._session.stats()["n_prefill_tokens"]
            reply = c.send(q, max_tokens=8)
            t = c.turn
            total += t["n_prefilled"] + t["n_generated"]
            assert t["stopped"] in ("eos", "max_tokens") and reply
            assert c.cached_tokens == c._session.history() and c._session.pos <= m.n_ctx
            assert c.cached_tokens[:keep] == head[:keep]
            if slid and k:
                assert t["n_reused"] >= keep
            slid += c._session.pos < t["n_prompt"] + t["n_generated"] - 1
            assert c._session.stats()["n_prefill_tokens"] >= before
        assert total > 5 * m.n_ctx and slid
