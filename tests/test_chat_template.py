"""edgerun.chat.render against transformers' apply_chat_template(tokenize=False).

Every real template in ../shared/data/chat_templates/ is rendered by both on the
same conversations (system prompts, several turns, empty and non-ASCII content,
HTML characters that a wrong tojson would escape, tools and tool calls,
reasoning, enable_thinking, date_string), with and without the generation
prompt; the texts must be equal to the character. A template that raises must
raise ChatTemplateError with the template's own message. Small inline templates
pin the engine's settings one by one (whitespace control, loop controls,
tojson's arguments, strftime_now, namespace, {% generation %}).
"""
import datetime
import pathlib

import pytest

from edgerun import errors
from edgerun.chat import render

transformers = pytest.importorskip("transformers")

BOS, EOS = "<s>", "</s>"

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather now in a city (°C)",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "e.g. Zürich"}},
                   "required": ["city"]}}}]

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
    "multi_turn": [{"role": "system", "content": "Answer in French."},
                   {"role": "user", "content": "One?"}, {"role": "assistant", "content": "Un."},
                   {"role": "user", "content": "Two?"}, {"role": "assistant", "content": "Deux."},
                   {"role": "user", "content": "Three?"}],
    "no_system_multi": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "user", "content": "c"}],
    "empty": [{"role": "user", "content": ""}, {"role": "assistant", "content": ""},
              {"role": "user", "content": ""}],
    "non_ascii": [{"role": "system", "content": "Réponds en 日本語 😀"},
                  {"role": "user", "content": "<b>&'\"</b>\n\tẞ ǅ \u200b\u00a0 — ok?"},
                  {"role": "assistant", "content": "  spaces kept?  \n"}, {"role": "user", "content": "🙂"}],
    "none_keys": [{"role": "user", "content": "x", "tool_calls": None, "name": None}],
    "tool_call": [{"role": "user", "content": "Weather in Zürich?"},
                  {"role": "assistant", "content": "", "tool_calls": [
                      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
                  {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21, \"sky\": \"<clear>\"}"},
                  {"role": "assistant", "content": "21 °C."}, {"role": "user", "content": "Thanks"}],
    "reasoning": [{"role": "user", "content": "2+2?"},
                  {"role": "assistant", "content": "4", "reasoning_content": "Two and two make four."},
                  {"role": "user", "content": "3+3?"}],
}

# (conversation, extra arguments): the variables templates take.
CASES = [(name, {}) for name in CONVERSATIONS] + [
    ("user", {"tools": TOOLS}),
    ("tool_call", {"tools": TOOLS}),
    ("system", {"tools": TOOLS}),
    ("user", {"enable_thinking": False}),
    ("reasoning", {"enable_thinking": True}),
    ("multi_turn", {"enable_thinking": False}),
    ("system", {"date_string": "26 Jul 2024"}),
    ("user", {"date_string": "1 Jan 2030", "tools": TOOLS}),
]


def _templates():
    root = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "chat_templates"
    files = sorted(root.glob("*.jinja")) if root.is_dir() else []
    return files or [pytest.param(None, marks=pytest.mark.skip(reason="../shared/data/chat_templates is absent"))]


@pytest.fixture(scope="module")
def hf_tok(shared_data):
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_file=str(shared_data / "tokenizers" / "hf" / "gpt2" / "tokenizer.json"),
                                  bos_token=BOS, eos_token=EOS)
    assert tok.special_tokens_map == {"bos_token": BOS, "eos_token": EOS}
    return tok


def _both(hf_tok, template, messages, agp, **kw):
    """(transformers' text or ('raises', message), ours or ('raises', message))."""
    try:
        ref = hf_tok.apply_chat_template(messages, chat_template=template, tokenize=False,
                                         add_generation_prompt=agp, **kw)
    except Exception as e:  # the template raised (or failed) under transformers too
        ref = ("raises", str(e))
    try:
        ours = render(template, messages, add_generation_prompt=agp, bos_token=BOS, eos_token=EOS, **kw)
    except errors.ChatTemplateError as e:
        ours = ("raises", str(e))
    return ref, ours


@pytest.mark.parametrize("path", _templates(), ids=lambda p: p.stem if p else "none")
def test_real_templates_render_as_transformers(path, hf_tok):
    template = path.read_text()
    rendered = 0
    for name, kw in CASES:
        for agp in (True, False):
            ref, ours = _both(hf_tok, template, CONVERSATIONS[name], agp, **kw)
            if isinstance(ref, tuple):
                # The template refused this conversation: ours must refuse with its words.
                assert isinstance(ours, tuple), (name, kw, agp, ours)
                assert ref[1] in ours[1], (name, kw, agp, ref, ours)
            else:
                assert ours == ref, (name, kw, agp)
                rendered += 1
    assert rendered >= 8      # most cases render on every template


def test_templates_read_their_variables(shared_data, hf_tok):
    """The variables change the text (so the cases above test something)."""
    root = shared_data / "chat_templates"
    qwen3 = (root / "Qwen-Qwen3-0.6B.jinja").read_text()
    msgs = CONVERSATIONS["user"]
    on = render(qwen3, msgs, bos_token=BOS, eos_token=EOS)
    off = render(qwen3, msgs, bos_token=BOS, eos_token=EOS, enable_thinking=False)
    assert on != off and "<think>" in off
    llama = (root / "meta-llama-Llama-3.2-3B-Instruct.jinja").read_text()
    assert "26 Jul 2024" in render(llama, msgs, bos_token=BOS, date_string="26 Jul 2024")
    today = datetime.datetime.now().strftime("%d %b %Y")
    assert today in render(llama, msgs, bos_token=BOS)          # strftime_now
    assert "get_weather" in render(llama, msgs, bos_token=BOS, tools=TOOLS)
    assert render(llama, msgs, bos_token=BOS).startswith(BOS)
    assert not render(llama, msgs).startswith(BOS)               # no bos_token: undefined, renders empty


def test_raise_exception_is_a_typed_error(shared_data):
    gemma = (shared_data / "chat_templates" / "google-gemma-2-2b-it.jinja").read_text()
    with pytest.raises(errors.ChatTemplateError, match="System role not supported"):
        render(gemma, CONVERSATIONS["system"], bos_token=BOS)
    with pytest.raises(errors.ChatTemplateError, match="alternate"):
        render(gemma, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], bos_token=BOS)


INLINE = {
    "whitespace": "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n  {% endif %}\n"
                  "{% endfor %}\n{%- if add_generation_prompt %} >{% endif %}",
    "loop_controls": "{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}"
                     "{% if loop.index > 3 %}{% break %}{% endif %}{{ loop.index }}:{{ m.content }};{% endfor %}",
    "tojson": "{{ messages | tojson }}|{{ messages[0] | tojson(indent=2, sort_keys=True) }}|"
              "{{ messages | tojson(separators=(',', ':'), ensure_ascii=True) }}",
    "namespace": "{% set ns = namespace(n=0, last='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                 "{% set ns.last = m.content %}{% endfor %}{{ ns.n }} {{ ns.last }}",
    "dict": "{% set d = dict(a=1, b=messages|length) %}{{ d | tojson }} {{ dict.fromkeys(['x', 'y']) | tojson }}",
    "generation": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}<{{ m.content }}>"
                  "{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
    "strftime": "{{ strftime_now('%Y-%m-%d') }}",
    "variables": "{{ bos_token }}|{{ eos_token }}|{{ custom_flag }}|{{ tools is none }}|{{ documents is none }}",
    "undefined": "[{{ not_given }}][{{ messages[0].missing }}]",
}


@pytest.mark.parametrize("name", sorted(INLINE))
def test_engine_settings_match_transformers(name, hf_tok):
    msgs = CONVERSATIONS["multi_turn"][:3] + [{"role": "user", "content": "é <&> \"q\""}]
    kw = {"custom_flag": 7} if name == "variables" else {}
    ref, ours = _both(hf_tok, INLINE[name], msgs, True, **kw)
    if name == "strftime" and ref != ours:      # the clock passed midnight between the two renders
        ref, ours = _both(hf_tok, INLINE[name], msgs, True)
    assert ours == ref
    assert not isinstance(ours, tuple)


def test_sandbox_and_template_errors(hf_tok):
    msgs = CONVERSATIONS["user"]
    # the sandbox refuses attribute escapes and underscore names on a namespace, as transformers does
    for bad in ("{{ messages.__class__.__mro__ }}", "{% set ns = namespace(_x=1) %}{{ ns._x }}",
                "{{ messages.append(1) }}"):
        ref, ours = _both(hf_tok, bad, msgs, True)
        assert isinstance(ours, tuple), bad
        assert isinstance(ref, tuple), bad
    with pytest.raises(errors.ChatTemplateError, match="does not parse.*line 2"):
        render("ok\n{% for m in messages %}", msgs)
    with pytest.raises(errors.ChatTemplateError, match="bad role x"):
        render("{{ raise_exception('bad role ' + messages[0].content) }}", [{"role": "user", "content": "x"}])
    with pytest.raises(errors.ChatTemplateError):
        render("{{ 1 / 0 }}", msgs)
    with pytest.raises(errors.InvalidArgumentError):
        render("x", "not a list")
    with pytest.raises(errors.InvalidArgumentError):
        render("x", [("user", "hi")])
    with pytest.raises(errors.InvalidArgumentError):
        render("x", msgs, tools=[print])
    with pytest.raises(errors.InvalidArgumentError):
        render(b"x", msgs)
    # the caller's messages are not touched (None keys dropped, reasoning aliased in copies only)
    m = [{"role": "user", "content": "x", "name": None, "reasoning": "r"}]
    render("{{ messages[0] | tojson }}", m)
    assert m == [{"role": "user", "content": "x", "name": None, "reasoning": "r"}]
