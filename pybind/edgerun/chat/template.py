"""Hugging Face chat templates, rendered as transformers renders them.

A model's chat template is a Jinja program published with it (tokenizer_config.json,
or a GGUF file's `tokenizer.chat_template`). What the model saw in training is
exactly what transformers' `apply_chat_template(..., tokenize=False)` produces,
so a character of difference (a newline that `trim_blocks` would have eaten, a
`tojson` that escapes "<" or non-ASCII) is a prompt the model was never taught.
Hence the same engine with the same settings, not a re-implementation:

  * jinja2's ImmutableSandboxedEnvironment (templates are code from the internet:
    no attribute escapes, no mutation of the caller's lists and dicts);
  * trim_blocks and lstrip_blocks on, and the loop controls extension
    ({% break %} / {% continue %});
  * the globals raise_exception(message), strftime_now(format), dict(...) and a
    namespace() that refuses underscore names; the filter tojson(x,
    ensure_ascii=False, indent=None, separators=None, sort_keys=False) that
    writes plain json.dumps (jinja's own escapes HTML characters);
  * the {% generation %} ... {% endgeneration %} block some templates use to
    mark what the assistant wrote (rendered as its body);
  * the variables transformers passes: messages (None-valued keys dropped,
    reasoning copied under `thinking` and `reasoning_content`), tools,
    documents, add_generation_prompt, the tokenizer's special tokens
    (bos_token, eos_token) and any extra ones (enable_thinking, date_string...).

Everything a template fails on, its own raise_exception() included, comes out
as errors.ChatTemplateError carrying the template's message.
"""
import datetime
import functools
import json
from collections.abc import Mapping

from .. import errors

# Older jinja2 releases have known sandbox escapes; transformers refuses them too.
_MIN_JINJA = (3, 1, 6)

# Names under which a message's reasoning may come; the first is what templates read.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _jinja():
    try:
        import jinja2
        import jinja2.ext
        import jinja2.sandbox
    except ImportError:
        raise errors.UnsupportedError(
            "chat templates need the jinja2 package; install it with `pip install 'jinja2>=3.1.6'`", -4) from None
    have = tuple(int(x) for x in jinja2.__version__.split(".")[:3] if x.isdigit())
    if have < _MIN_JINJA:
        raise errors.UnsupportedError(
            f"chat templates need jinja2 >= 3.1.6 (older ones have sandbox escapes), found {jinja2.__version__}; "
            "upgrade it with `pip install -U jinja2`", -4)
    return jinja2


@functools.lru_cache(maxsize=None)
def _environment():
    jinja2 = _jinja()

    class GenerationBlock(jinja2.ext.Extension):
        """{% generation %}...{% endgeneration %}: transformers uses it to find the
        assistant's characters for training masks; rendering keeps the body."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    class TemplateDict:
        # dict() without handing the template the dict type itself.
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class Namespace(jinja2.utils.Namespace):
        # An underscore attribute on a namespace is a way into CPython internals.
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                Namespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            Namespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"a chat template may not set the underscore attribute {name!r} on a namespace")

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = Namespace
    return env


@functools.lru_cache(maxsize=32)
def compile_template(template):
    """The compiled template (cached: a chat renders the same text every turn).
    ChatTemplateError when it does not parse."""
    if not isinstance(template, str):
        raise errors.InvalidArgumentError(
            f"a chat template is Jinja text (str), got {type(template).__name__}", -1)
    env = _environment()
    try:
        return env.from_string(template)
    except Exception as e:
        raise errors.ChatTemplateError(f"the chat template does not parse: {_describe(e)}") from e


def _describe(e):
    line = getattr(e, "lineno", None)
    msg = getattr(e, "message", None) or str(e) or type(e).__name__
    return f"{msg} (line {line})" if line else msg


def _plain(value):
    """What a template may see: JSON-like data rebuilt from the caller's, so no
    object with methods the sandbox does not know about gets in."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    item = getattr(value, "item", None)          # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return _plain(item())
    # bytes, dates, sets, objects: a template would print something the
    # caller never meant the model to read; say so instead
    raise errors.InvalidArgumentError(
        f"a chat message or template variable holds a {type(value).__name__}; pass str, numbers, bools, "
        "None, lists and dicts of them", -1)


def _messages(messages):
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise errors.InvalidArgumentError(
            "messages must be a list of {'role': ..., 'content': ...} dicts", -1)
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise errors.InvalidArgumentError(
                f"message {i} is a {type(m).__name__}, not a dict with 'role' and 'content'", -1)
        # APIs send content=None / tool_calls=None; templates handle a missing
        # key but would print "None" for a present one.
        m = _plain({k: v for k, v in m.items() if v is not None})
        reasoning = next((m[k] for k in _REASONING_FIELDS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


def render(template, messages, add_generation_prompt=True, bos_token=None, eos_token=None, tools=None,
           documents=None, **variables):
    """The text of `messages` in chat template `template` (Jinja source), as
    transformers' apply_chat_template(messages, chat_template=template,
    tokenize=False, add_generation_prompt=..., tools=..., documents=...,
    **variables) gives it on a tokenizer whose special tokens are bos_token and
    eos_token (None: the template sees them undefined, as for a tokenizer
    without one). `variables` are further names the template reads:
    enable_thinking=False, date_string="26 Jul 2024", other special tokens...

    tools: JSON schemas (dicts) of the functions the model may call.
    Raises ChatTemplateError (the template's message) when the template does
    not parse or fails, its own raise_exception() included."""
    compiled = compile_template(template)
    chat = _messages(messages)
    if tools is not None:
        tools = list(tools)
        for t in tools:
            if not isinstance(t, Mapping):
                raise errors.InvalidArgumentError(
                    f"tools must be JSON schemas (dicts), got a {type(t).__name__}; "
                    "describe each function as {'type': 'function', 'function': {...}}", -1)
    if documents is not None:
        documents = list(documents)
        for d in documents:
            if not isinstance(d, Mapping):
                raise errors.InvalidArgumentError("documents must be dicts with 'title' and 'text' keys", -1)
    names = {}
    if bos_token is not None:
        names["bos_token"] = bos_token
    if eos_token is not None:
        names["eos_token"] = eos_token
    names.update(variables)         # as transformers: the caller's names win over the tokenizer's
    for reserved in ("messages", "tools", "documents", "add_generation_prompt"):
        if reserved in names:
            raise errors.InvalidArgumentError(f"{reserved!r} is a parameter of render(), not a template variable", -1)
    # a value of the caller's the template cannot take is the caller's mistake, not the template's
    tools, documents, names = _plain(tools), _plain(documents), _plain(names)
    try:
        return compiled.render(messages=chat, tools=tools, documents=documents,
                               add_generation_prompt=add_generation_prompt, **names)
    except Exception as e:
        raise errors.ChatTemplateError(f"the chat template failed: {_describe(e)}") from e
