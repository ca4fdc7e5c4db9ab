"""Bad input never hurts `edgerun serve`: malformed JSON, wrong field types,
unknown models, negative or huge max_tokens, prompts longer than the context,
oversized bodies, unknown routes -- each is a 4xx with an OpenAI-style error
body, and the server keeps answering good requests."""
import json
import random

import httpx
import pytest

from serve_helpers import client, need_serve, served

openai = need_serve()
MODEL = "edgerun-add"
# Refuses a system message (as some published templates do), to show a
# template's own error reaching the client as a 400.
STRICT_TEMPLATE = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('system messages are not "
                   "supported') }}{% endif %}{{ bos_token }}{{ messages[-1]['content'] }}")
GOOD = {"model": MODEL, "prompt": "0012+0034=", "max_tokens": 8, "temperature": 0}


@pytest.fixture(scope="module")
def base():
    with served(parallel=2, chat_template=STRICT_TEMPLATE, max_body=64 * 1024) as (srv, url):
        yield url


# One client for the module: a new httpx client builds an SSL context (~0.1 s),
# even for plain http.
_http = httpx.Client(timeout=30)


def post(base, path, body, raw=False):
    data = body if raw else json.dumps(body).encode()
    return _http.post(f"{base}{path}", content=data, headers={"Content-Type": "application/json"})


def assert_error(r, status=400, param=None, code=None):
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    return err


def still_serving(base):
    r = post(base, "/v1/completions", GOOD)
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "64000"


@pytest.mark.parametrize("raw", [b"{bad", b"", b"\xff\xfe\x00", b"[" * 30000 + b"]" * 30000, b"nul",
                                 b'{"model": "edgerun-add", "prompt": "0012+0034=",'],
                         ids=["brace", "empty", "not-utf8", "nested-30000", "nul", "truncated"])
def test_malformed_json(base, raw):
    assert_error(post(base, "/v1/completions", raw, raw=True), code="invalid_json")
    still_serving(base)


@pytest.mark.parametrize("patch,param", [
    ({"prompt": 5}, "prompt"), ({"prompt": None}, "prompt"), ({"prompt": ""}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"), ({"prompt": [1, "x"]}, "prompt"), ({"prompt": {"a": 1}}, "prompt"),
    ({"max_tokens": "8"}, "max_tokens"), ({"max_tokens": 8.5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"), ({"temperature": "hot"}, "temperature"),
    ({"temperature": -1}, "temperature"), ({"temperature": 1e308}, "temperature"),
    ({"top_p": 2}, "top_p"), ({"top_p": [1]}, "top_p"), ({"seed": 1.5}, "seed"), ({"seed": 2 ** 70}, "seed"),
    ({"stream": "yes"}, "stream"), ({"stop": 5}, "stop"), ({"stop": ["a"] * 5}, "stop"),
    ({"stop": ["x" * 300]}, "stop"), ({"n": 2}, "n"), ({"echo": True}, "echo"), ({"logprobs": 3}, "logprobs"),
    ({"presence_penalty": 1}, "presence_penalty"), ({"model": 7}, "model"), ({"model": None}, "model"),
    ({"stream_options": {"include_usage": True}}, "stream_options"), ({"ignore_eos": 1}, "ignore_eos"),
    ({"prompt": "0012\ud800"}, "prompt"), ({"stop": ["\udfff"]}, "stop"),
])
def test_wrong_field_types_and_values(base, patch, param):
    body = {**GOOD, **patch}
    if patch.get("model", "") is None:
        del body["model"]
    assert_error(post(base, "/v1/completions", body), param=param)


def test_not_an_object_and_nan(base):
    assert_error(post(base, "/v1/completions", [GOOD]))
    assert_error(post(base, "/v1/completions", b'{"model": "edgerun-add", "prompt": "1", "temperature": NaN}',
                      raw=True), param="temperature")
    still_serving(base)


def test_unknown_model(base):
    err = assert_error(post(base, "/v1/completions", {**GOOD, "model": "gpt-4o"}), param="model",
                       code="model_not_found")
    assert "edgerun-add" in err["message"]
    with pytest.raises(openai.BadRequestError):
        client(base).chat.completions.create(model="nope", messages=[{"role": "user", "content": "1+1="}])


@pytest.mark.parametrize("n", [-1, 0, 10 ** 12, 2 ** 63, 53])
def test_negative_or_huge_max_tokens(base, n):
    # The embedded model's context is 64 tokens and the prompt 12: 52 fit, 53 do not.
    assert_error(post(base, "/v1/completions", {**GOOD, "max_tokens": n}), param="max_tokens")
    assert post(base, "/v1/completions", {**GOOD, "max_tokens": 52}).status_code == 200


def test_prompt_longer_than_the_context(base):
    long = "0012+0034=" * 7
    assert_error(post(base, "/v1/completions", {**GOOD, "prompt": long, "max_tokens": 1}), param="prompt",
                 code="context_length_exceeded")
    assert_error(post(base, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": long}]}),
                 param="messages", code="context_length_exceeded")
    assert_error(post(base, "/v1/completions", {**GOOD, "prompt": [1] * 64}), code="context_length_exceeded")
    assert_error(post(base, "/v1/completions", {**GOOD, "prompt": [1, 16]}), param="prompt")     # vocab is 16
    with pytest.raises(openai.BadRequestError) as e:
        client(base).completions.create(model=MODEL, prompt=long, max_tokens=1)
    assert e.value.code == "context_length_exceeded"
    still_serving(base)


@pytest.mark.parametrize("messages", [
    None, [], "hi", [{"content": "x"}], [{"role": "wizard", "content": "x"}], [{"role": "user", "content": 5}],
    [{"role": "user", "content": [{"type": "image_url"}]}], ["user"],
    [{"role": "user", "content": "lone \ud83d surrogate"}]])
def test_bad_chat_messages(base, messages):
    body = {"model": MODEL, "messages": messages}
    err = assert_error(post(base, "/v1/chat/completions", body))
    assert err["param"].startswith("messages")


def test_chat_template_errors_are_400(base):
    err = assert_error(post(base, "/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "0012+0034="}]}), param="messages")
    assert "system messages are not supported" in err["message"]
    assert_error(post(base, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "1="}],
                                                     "tools": [{"type": "function"}]}), param="tools")
    r = post(base, "/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "0012+"}, {"type": "text", "text": "0034="}]}],
        "temperature": 0})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "64000"


def test_no_chat_template_is_400():
    with served(parallel=1) as (srv, url):
        err = assert_error(post(url, "/v1/chat/completions", {"model": MODEL, "messages": [
            {"role": "user", "content": "0012+0034="}]}), code="no_chat_template")
        assert "--chat-template" in err["message"]
        still_serving(url)


def test_bodies_are_bounded(base):
    big = {**GOOD, "prompt": "1" * (70 * 1024)}
    assert_error(post(base, "/v1/completions", big), status=413, code="request_too_large")

    def chunks():          # no Content-Length: the limit holds while reading
        for _ in range(100):
            yield b" " * 1024
    r = _http.post(f"{base}/v1/completions", content=chunks())
    assert_error(r, status=413)
    still_serving(base)


def test_unknown_routes_and_methods(base):
    assert_error(_http.get(f"{base}/v1/nothing"), status=404)
    assert_error(_http.get(f"{base}/v1/completions"), status=405)
    assert_error(_http.get(f"{base}/v1/models/gpt-4"), status=400, code="model_not_found")


def test_random_bodies_never_500(base):
    """A bounded fuzz: 300 bodies mixing valid and invalid values per field."""
    rng = random.Random(27)
    values = [None, True, -1, 0, 1, 3, 2 ** 40, 0.5, -0.0, "x", "", "0012+0034=", [], [1, 2], ["a"], {}, {"a": 1},
              [[1]], "\u0000", "\ud7ff" * 3, "\ud800"]
    fields = ["model", "prompt", "messages", "max_tokens", "temperature", "top_p", "seed", "stop", "stream", "n",
              "stream_options", "ignore_eos", "max_completion_tokens"]
    for i in range(300):
        body = {"model": MODEL, "prompt": "0012+0034=", "messages": [{"role": "user", "content": "1+1="}]}
        for f in rng.sample(fields, rng.randint(1, 5)):
            body[f] = rng.choice(values)
        path = rng.choice(["/v1/completions", "/v1/chat/completions"])
        r = post(base, path, body)
        assert r.status_code in (200, 400), (i, body, r.status_code, r.text)
        if r.status_code == 400:
            assert_error(r)
    still_serving(base)
    assert _http.get(f"{base}/health").json()["slots_busy"] == 0
