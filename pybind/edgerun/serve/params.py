"""Request bodies checked field by field before anything runs. A field of the
wrong type, out of range, or asking for something this server does not do is
a 400 naming the field (`param`), so the client learns what to fix; fields
this server does not know are ignored, as clients send extras freely.

Limits that keep one request from costing the server more than its share:
  * the body size (app.py, before parsing);
  * at most MAX_STOPS stop strings of at most MAX_STOP_CHARS each;
  * at most MAX_MESSAGES messages;
  * max_tokens at least 1, and prompt + max_tokens within the context
    (checked after tokenizing, in app.py).
"""
import math
from dataclasses import dataclass, field

from .errors import bad_request

MAX_STOPS = 4             # OpenAI's own limit
MAX_STOP_CHARS = 256
MAX_MESSAGES = 1024
ROLES = ("system", "user", "assistant", "developer", "tool")


@dataclass
class GenParams:
    """What the scheduler needs besides the prompt."""
    model: str
    max_tokens: int = None          # None: the default of the endpoint
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = None
    stop: list = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    ignore_eos: bool = False


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _unicode(v, param):
    """JSON can carry a lone UTF-16 surrogate ("\\ud800"), which is no character
    and has no UTF-8 form: refused here, before the tokenizer sees it."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_request(f"'{param}' is not valid Unicode (it holds a lone surrogate)", param=param) from None
    return v


def _number(body, name, default, lo, hi):
    v = body.get(name)
    if v is None:
        return default
    if not _is_num(v) or not lo <= v <= hi:
        raise bad_request(f"'{name}' must be a number in [{lo}, {hi}], got {v!r}", param=name)
    return float(v)


def _bool(body, name):
    v = body.get(name)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise bad_request(f"'{name}' must be true or false, got {v!r}", param=name)
    return v


def _unsupported(body, name, allowed, what):
    """A field whose other values this server does not do: refuse, never
    silently answer something else than what was asked."""
    v = body.get(name)
    if v is not None and v not in allowed:
        raise bad_request(f"'{name}': {what}", param=name)


def common(body, max_tokens_keys=("max_tokens",)):
    """The fields both endpoints share."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("'model' is required: a model id from GET /v1/models", param="model")
    max_tokens = None
    for key in max_tokens_keys:
        v = body.get(key)
        if v is None:
            continue
        if not _is_int(v) or v < 1:
            raise bad_request(f"'{key}' must be an integer >= 1, got {v!r}", param=key)
        max_tokens = v
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or not -2**63 <= seed < 2**64):
        raise bad_request(f"'seed' must be a 64-bit integer, got {seed!r}", param="seed")
    stop = body.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise bad_request("'stop' must be a string or a list of strings", param="stop")
    if len(stop) > MAX_STOPS or any(len(s) > MAX_STOP_CHARS for s in stop):
        raise bad_request(f"'stop' takes at most {MAX_STOPS} strings of at most {MAX_STOP_CHARS} characters",
                          param="stop")
    for s in stop:
        _unicode(s, "stop")
    stream = _bool(body, "stream")
    opts = body.get("stream_options")
    include_usage = False
    if opts is not None:
        if not isinstance(opts, dict) or not isinstance(opts.get("include_usage", False), bool):
            raise bad_request("'stream_options' must be an object like {\"include_usage\": true}",
                              param="stream_options")
        if not stream:
            raise bad_request("'stream_options' is only allowed with 'stream': true", param="stream_options")
        include_usage = opts.get("include_usage", False)
    n = body.get("n")
    if n is not None and (not _is_int(n) or n != 1):
        raise bad_request(f"'n' must be 1 (one choice per request), got {n!r}", param="n")
    for name in ("presence_penalty", "frequency_penalty"):
        v = body.get(name)
        if v is not None and (not _is_num(v) or v != 0):
            raise bad_request(f"'{name}' is not supported (only 0)", param=name)
    _unsupported(body, "logit_bias", ({},), "logit_bias is not supported")
    return GenParams(model=model, max_tokens=max_tokens,
                     temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
                     top_p=_number(body, "top_p", 1.0, 0.0, 1.0),
                     seed=seed, stop=stop, stream=stream, include_usage=include_usage,
                     ignore_eos=_bool(body, "ignore_eos"))


def completion(body):
    """(GenParams, prompt): prompt is text, or a list of token ids."""
    gp = common(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]              # a batch of one
    if isinstance(prompt, str):
        if not prompt:
            raise bad_request("'prompt' is empty", param="prompt")
        _unicode(prompt, "prompt")
    elif isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
        pass
    elif isinstance(prompt, list) and len(prompt) > 1:
        raise bad_request("'prompt' holds several prompts; send one per request", param="prompt")
    else:
        raise bad_request("'prompt' must be a string or a list of token ids", param="prompt")
    _unsupported(body, "echo", (False,), "echo is not supported")
    _unsupported(body, "logprobs", (None,), "logprobs are not supported")
    _unsupported(body, "suffix", (None, ""), "suffix (insertion) is not supported")
    _unsupported(body, "best_of", (1,), "best_of must be 1")
    return gp, prompt


def _content(m, i):
    c = m.get("content")
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        parts = []
        for p in c:
            if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                raise bad_request(f"messages[{i}].content: only text parts ({{\"type\": \"text\", \"text\": ...}}) "
                                  "are supported", param=f"messages[{i}].content")
            parts.append(p["text"])
        return "".join(parts)
    raise bad_request(f"messages[{i}].content must be a string or a list of text parts", param=f"messages[{i}].content")


def chat(body):
    """(GenParams, messages) with messages as plain {"role", "content"[, "name"]}."""
    gp = common(body, max_tokens_keys=("max_tokens", "max_completion_tokens"))
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise bad_request("'messages' must be a non-empty list of {\"role\", \"content\"} objects", param="messages")
    if len(msgs) > MAX_MESSAGES:
        raise bad_request(f"'messages' holds {len(msgs)} messages; at most {MAX_MESSAGES}", param="messages")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise bad_request(f"messages[{i}] must be an object", param=f"messages[{i}]")
        role = m.get("role")
        if role not in ROLES:
            raise bad_request(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}",
                              param=f"messages[{i}].role")
        msg = {"role": role, "content": _unicode(_content(m, i), f"messages[{i}].content")}
        if isinstance(m.get("name"), str):
            msg["name"] = _unicode(m["name"], f"messages[{i}].name")
        out.append(msg)
    for name in ("tools", "functions"):
        if body.get(name):
            raise bad_request(f"'{name}' (tool calls) is not supported", param=name)
    _unsupported(body, "logprobs", (None, False), "logprobs are not supported")
    rf = body.get("response_format")
    if rf is not None and rf != {"type": "text"}:
        raise bad_request("'response_format' other than text is not supported", param="response_format")
    return gp, out
