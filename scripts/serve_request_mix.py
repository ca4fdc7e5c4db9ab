"""The soak's request mix against an OpenAI-compatible server, one request per
index i: completions and chat, plain and streamed, and every fifth a bad
request (max_tokens -1) that must be answered 400. Shared by
tests/test_serve_soak.py (0 failed, RSS growth) and scripts/serve_memory.py
(where the memory goes), so that both measure the same traffic."""
import addition_task as task


def problems():
    return task.make_problems(task.HELD_OUT_COUNT, task.HELD_OUT_SEED, "test")


def one_request(api, http, base, model, probs, i):
    """True when request i got what it should: the right sum, or a 400.
    api: an openai.OpenAI client on base/v1; http: an httpx.Client."""
    a, b = probs[i % len(probs)]
    kind = i % 5
    if kind == 4:
        r = http.post(f"{base}/v1/completions", json={"model": model, "prompt": "1", "max_tokens": -1})
        return r.status_code == 400
    kw = dict(model=model, max_tokens=task.MAX_NEW_TOKENS, temperature=0)
    messages = [{"role": "user", "content": task.prompt(a, b)}]
    if kind == 0:
        text = api.completions.create(prompt=task.prompt(a, b), **kw).choices[0].text
    elif kind == 1:
        text = "".join(c.choices[0].text for c in api.completions.create(prompt=task.prompt(a, b), stream=True, **kw))
    elif kind == 2:
        text = api.chat.completions.create(messages=messages, **kw).choices[0].message.content
    else:
        text = "".join(c.choices[0].delta.content or "" for c in
                       api.chat.completions.create(messages=messages, stream=True, **kw) if c.choices)
    return task.is_correct(a, b, text)
