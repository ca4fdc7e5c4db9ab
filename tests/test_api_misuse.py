"""The Python API used the wrong way round: a stream outliving its session
or model, two streams on one session, a tokenizer outliving a swapped-out
model, one arena for two models, arguments of the wrong type. Each case
runs in a child process, so a regression that crashes the interpreter
fails its test instead of ending the run; each must end in a typed error
and leave nothing half done."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import edgerun
from edgerun import errors

PYBIND = pathlib.Path(__file__).resolve().parent.parent / "pybind"
P = "0012+0034="


def child(code):
    """Runs code with edgerun imported; returns its stdout, failing on a crash."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYBIND) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c",
                        "import edgerun\nfrom edgerun import errors\n" + textwrap.dedent(code)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


CLOSED_UNDER_A_STREAM = {
    "model closed": """
        m = edgerun.Model(); g = m.generate(P, stream=True); next(g); m.close()
        """,
    "session closed, slot reused": """
        m = edgerun.Model(n_sessions=1); s = m.session(); g = s.generate(P, stream=True); next(g); s.close()
        s2 = m.session(); s2.decode([1, 6, 3, 3]); before = s2.history()
        """,
    "second stream on the session": """
        m = edgerun.Model(); s = m.session(); g = s.generate(P, stream=True); next(g)
        s.generate(P, max_tokens=2)
        """,
    "chat model closed": """
        m = edgerun.Model()
        c = m.chat_session(chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")
        g = c.send(P, stream=True); next(g); m.close()
        """,
}


@pytest.mark.parametrize("case", sorted(CLOSED_UNDER_A_STREAM))
def test_a_stream_whose_slot_went_away_raises(case):
    out = child(f"P = {P!r}\n" + textwrap.dedent(CLOSED_UNDER_A_STREAM[case]) + """
try:
    list(g)
    print("no error")
except errors.StateError as e:
    print("StateError")
if 's2' in dir():
    assert s2.history() == before, (before, s2.history())   # the old stream wrote nothing into it
""")
    assert out.strip() == "StateError", out


def test_a_tokenizer_from_a_swapped_out_model_raises():
    out = child("""
        live = edgerun.LiveModel.open()
        tok = live.model.tokenizer
        live.swap(edgerun.model.default_model_path())
        for call in (lambda: tok.decode([1]), lambda: tok.piece(3), lambda: tok.encode("0012")):
            try:
                call(); print("no error")
            except errors.StateError:
                print("StateError")
        live.close()
        """)
    assert out.split() == ["StateError"] * 3, out


def test_a_with_block_on_the_models_tokenizer_leaves_it_usable():
    with edgerun.Model() as m:
        with m.tokenizer as t:
            ids = t.encode(P)
        assert m.tokenizer.encode(P) == ids
        assert m.generate(P, max_tokens=8) == "64000"


def test_one_arena_for_two_models_is_refused():
    buf = edgerun.aligned_buffer(edgerun.plan()["total_bytes"])
    with edgerun.Model(arena=buf):
        with pytest.raises(errors.InvalidArgumentError, match="already the arena of an open model"):
            edgerun.Model(arena=buf)
    with edgerun.Model(arena=buf) as m:             # free again once the first closed
        assert m.generate(P, max_tokens=8) == "64000"
    with pytest.raises(errors.InvalidArgumentError):
        edgerun.aligned_buffer(-1)


def test_bad_sampling_is_refused_before_the_prompt_is_cached():
    with edgerun.Model() as m, m.session() as s:
        for kw in ({"temperature": -1}, {"top_p": 0}, {"min_p": 2}, {"top_k": 1.5}, {"temperature": "hot"}):
            with pytest.raises(errors.InvalidArgumentError):
                s.generate(P, **kw)
            with pytest.raises(errors.InvalidArgumentError):
                s.generate(P, stream=True, **kw)
            assert s.pos == 0, kw
        assert s.generate(P, max_tokens=8) == "64000"


@pytest.mark.parametrize("ids", [[1.9], ["1"], [True], b"0012", "0012", 7])
def test_token_ids_must_be_integers(ids):
    with edgerun.Model() as m, m.session() as s:
        with pytest.raises(errors.InvalidArgumentError):
            s.decode(ids)
        if not isinstance(ids, str):    # a str is a text prompt to generate()
            with pytest.raises(errors.InvalidArgumentError):
                m.generate(ids)
        assert s.pos == 0


def test_a_nul_in_a_path_or_name_is_refused(tmp_path):
    with edgerun.Model() as m, m.session() as s:
        s.decode([1, 6, 3])
        with pytest.raises(errors.InvalidArgumentError, match="NUL"):
            s.save(str(tmp_path / "a\0b"))
        assert not (tmp_path / "a").exists()
    with pytest.raises(errors.InvalidArgumentError):
        edgerun.Model(isa="generic\0junk")


@pytest.mark.parametrize("value", [b"hi", {1, 2}, object()])
def test_a_chat_value_of_another_type_is_refused_not_printed(value):
    """The template would have printed "<bytes>" and the like into the prompt."""
    from edgerun.chat import render
    with pytest.raises(errors.InvalidArgumentError, match="holds a"):
        render("{{ messages[0].content }}", [{"role": "user", "content": value}])
    with pytest.raises(errors.InvalidArgumentError, match="holds a"):
        render("{{ x }}", [{"role": "user", "content": "hi"}], x=value)


def test_a_conversation_file_that_cannot_render_is_refused_before_loading(tmp_path):
    import json
    from edgerun.chat import sidecar
    tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with edgerun.Model() as m:
        c = m.chat_session(chat_template=tmpl)
        c.send("hi", max_tokens=2)
        c.save(tmp_path / "chat.snap")
        side = sidecar.path_of(tmp_path / "chat.snap")
        doc = json.loads(side.read_text())
        doc["variables"] = {"messages": 1}
        side.write_text(json.dumps(doc))
        before = (list(c._cache), c.stats()["messages"])
        with pytest.raises(errors.CorruptModelError, match="does not render"):
            c.load(tmp_path / "chat.snap")
        assert (list(c._cache), c.stats()["messages"]) == before
        assert isinstance(c.send("more", max_tokens=2), str)


def test_a_chat_that_json_cannot_hold_is_refused_before_its_snapshot_is_written(tmp_path):
    with edgerun.Model() as m:
        c = m.chat_session(chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")
        c.send("hi", max_tokens=2)
        c.totals["note"] = object()      # what JSON cannot hold
        with pytest.raises(errors.InvalidArgumentError, match="cannot be saved as JSON"):
            c.save(tmp_path / "chat.snap")
        assert not (tmp_path / "chat.snap").exists()


def test_live_model_checks_the_seed_as_a_session_does():
    with edgerun.LiveModel.open() as live:
        for seed in (1.5, True, "1"):
            with pytest.raises(errors.InvalidArgumentError, match="seed must be an integer"):
                live.generate(P, seed=seed)
        assert live.stats()["sessions_active"] == 0
        assert live.generate(P, seed=3, max_tokens=8) == "64000"


def test_arguments_of_the_wrong_type_get_typed_errors():
    with edgerun.Model(n_sessions=2) as m, m.session() as s:
        for call in (lambda: m.generate(P, stop=5), lambda: m.generate(P, stop=[None]),
                     lambda: m.generate(None), lambda: m.generate(P, temperature=None),
                     lambda: m.tokenizer.decode([2**31]), lambda: m.tokenizer.piece(2**40),
                     lambda: s.truncate(2**31)):
            with pytest.raises(errors.InvalidArgumentError):
                call()
        with pytest.raises(errors.InvalidArgumentError):
            edgerun.Model(kv_type=["f32"])
        assert m.generate(P, stop="") == m.generate(P) == "64000"


def test_chat_takes_the_arguments_generate_takes():
    import numpy as np
    with edgerun.Model() as m:
        c = m.chat_session(chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")
        assert isinstance(c.send(P, max_tokens=np.int64(3)), str)
        with pytest.raises(errors.InvalidArgumentError, match="stop must be"):
            c.send(P, stop=5)
