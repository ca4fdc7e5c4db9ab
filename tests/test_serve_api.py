"""`edgerun serve` through the official openai client on loopback: completions
and chat, plain and streamed (the same text), stop strings, max_tokens, seeds,
usage, the model list, /health and /metrics; prefix reuse of a slot's cache;
the CLI verb starts a server that answers."""
import signal

import httpx
import pytest

from serve_helpers import PLAIN_TEMPLATE, client, metric, need_serve, served, served_process

openai = need_serve()
MODEL = "edgerun-add"


@pytest.fixture(scope="module")
def server():
    with served(parallel=4, chat_template=PLAIN_TEMPLATE) as (srv, base):
        yield srv, base


@pytest.fixture(scope="module")
def api(server):
    return client(server[1])


def test_models_and_health(server, api):
    srv, base = server
    assert [m.id for m in api.models.list().data] == [MODEL]
    assert api.models.retrieve(MODEL).id == MODEL
    h = httpx.get(f"{base}/health").json()
    assert h["status"] == "ok" and h["slots"] == 4 and h["queue"] == 0


def test_completion_plain_equals_stream(api):
    import edgerun
    with edgerun.Model() as m:
        direct = m.generate("0012+0034=", max_tokens=8)
    r = api.completions.create(model=MODEL, prompt="0012+0034=", max_tokens=8, temperature=0)
    assert r.choices[0].text == direct == "64000"
    assert r.choices[0].finish_reason == "stop"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (12, 5)
    pieces = [c.choices[0].text for c in api.completions.create(model=MODEL, prompt="0012+0034=", max_tokens=8,
                                                                   temperature=0, stream=True)]
    assert "".join(pieces) == r.choices[0].text
    assert len([p for p in pieces if p]) == 5            # one piece per token, as they came


def test_chat_plain_equals_stream(api):
    msgs = [{"role": "user", "content": "0456+0123="}]
    r = api.chat.completions.create(model=MODEL, messages=msgs, temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == "97500"          # 579, digits reversed
    assert r.choices[0].finish_reason == "stop"
    chunks = list(api.chat.completions.create(model=MODEL, messages=msgs, temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == r.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens == 5


def test_stop_and_max_tokens(api):
    r = api.completions.create(model=MODEL, prompt="0012+0034=", max_tokens=8, temperature=0, stop=["0"])
    assert (r.choices[0].text, r.choices[0].finish_reason) == ("64", "stop")
    s = api.completions.create(model=MODEL, prompt="0012+0034=", max_tokens=8, temperature=0, stop="40", stream=True)
    assert "".join(c.choices[0].text for c in s) == "6"
    r = api.completions.create(model=MODEL, prompt="0012+0034=", max_tokens=2, temperature=0)
    assert (r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens) == ("64", "length", 2)
    # The embedded model's context is 64 tokens: ignore_eos runs it to the end.
    r = api.completions.create(model=MODEL, prompt="0012+0034=", temperature=0, max_tokens=52,
                               extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 52


def test_seeded_sampling_repeats(api):
    kw = dict(model=MODEL, prompt="0012+0034=", max_tokens=20, temperature=1.5, extra_body={"ignore_eos": True})
    a = api.completions.create(seed=7, **kw).choices[0].text
    b = "".join(c.choices[0].text for c in api.completions.create(seed=7, stream=True, **kw))
    others = {api.completions.create(seed=s, **kw).choices[0].text for s in range(8, 14)}
    assert a == b
    assert len(others | {a}) > 1          # the seed is used: other seeds give other samples


def test_slot_reuses_the_cached_prefix(server, api):
    """A prompt that extends what a slot's cache holds prefills only the new
    tokens (usage.prompt_tokens_details.cached_tokens)."""
    first = api.completions.create(model=MODEL, prompt="0777+0111=", max_tokens=8, temperature=0)
    assert first.choices[0].text == "88800"
    # The slot holds the prompt (BOS, the SentencePiece space, 10 characters)
    # and the 5 answer digits it decoded; the next prompt is that text plus one.
    second = api.completions.create(model=MODEL, prompt="0777+0111=88800" + "0", max_tokens=1, temperature=0,
                                    extra_body={"ignore_eos": True})
    assert second.usage.prompt_tokens == 18
    assert second.usage.prompt_tokens_details.cached_tokens == 17
    assert metric(server[1], "prompt_tokens_reused_total") >= 17


def test_slot_cuts_its_cache_back_to_a_shared_prefix(server, api):
    """With er_session_truncate in the library, a prompt that shares only a
    prefix with a slot's cache reuses that prefix (the cache is cut back to
    it); without, the slot starts over and says so (cached_tokens 0)."""
    from edgerun.serve.binding import can_truncate
    api.completions.create(model=MODEL, prompt="0512+0034=", max_tokens=8, temperature=0)
    r = api.completions.create(model=MODEL, prompt="0512+0035=", max_tokens=8, temperature=0)
    assert r.choices[0].text == "74500"                                     # 547, reversed
    # BOS, the space and "0512+003" are shared: 10 of the 12 prompt tokens.
    assert r.usage.prompt_tokens_details.cached_tokens == (10 if can_truncate() else 0)


def test_metrics_text(server, api):
    base = server[1]
    api.completions.create(model=MODEL, prompt="0001+0001=", max_tokens=8, temperature=0)
    text = httpx.get(f"{base}/metrics").text
    for name in ("requests_total", "generation_tokens_total", "prompt_tokens_total", "queue_depth", "slots_busy",
                 "time_to_first_token_seconds_bucket", "time_per_output_token_seconds_count",
                 "request_duration_seconds_sum", "queue_wait_seconds_count"):
        assert f"edgerun_{name}" in text, name
    assert metric(base, "requests_total", code="200", endpoint="/v1/completions") >= 1
    assert metric(base, "slots_total") == 4
    assert metric(base, "generation_tokens_total") >= 5
    assert 'le="+Inf"' in text


def test_cli_serve_answers(tmp_path):
    """`edgerun serve` (no model: the embedded one) in a process of its own."""
    tpl = tmp_path / "plain.jinja"
    tpl.write_text(PLAIN_TEMPLATE)
    with served_process("--parallel", "2", "--threads", "1", "--chat-template", tpl) as (proc, base):
        api = client(base)
        assert [m.id for m in api.models.list().data] == [MODEL]
        r = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "0012+0034="}],
                                        temperature=0)
        assert r.choices[0].message.content == "64000"
        assert httpx.get(f"{base}/health").json()["slots"] == 2
    # SIGTERM: uvicorn shuts down gracefully, then re-raises the signal so a
    # supervisor sees why it ended (a hang would have needed SIGKILL: -9).
    assert proc.returncode == -signal.SIGTERM


@pytest.mark.parametrize("args,msg", [(["--parallel", "0"], "--parallel must be >= 1"),
                                      (["--port", "70000"], "--port must be in [0, 65535]"),
                                      (["--prefill-share", "0"], "--prefill-share must be in (0, 100]"),
                                      (["x.gguf", "--config", "edgerun.yaml"], "drop MODEL")])
def test_cli_serve_bad_options(args, msg):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "edgerun", "serve", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and msg in r.stderr and r.stderr.startswith("edgerun: error:"), r.stderr


def _device_root(tmp_path, budget_mib=256):
    """A device root with one active slot whose edgerun.yaml names the embedded model."""
    import os

    import edgerun
    from edgerun.ota import device_config
    slot = tmp_path / "rootfs-a"
    slot.mkdir()
    cfg = device_config.make(edgerun.default_model_path(), "0012+0034=", "64000", root=str(tmp_path),
                             budget_mib=budget_mib)
    (slot / device_config.FILE_NAME).write_text(cfg.to_yaml())
    os.symlink("rootfs-a", tmp_path / "current")
    return tmp_path


def test_serve_device_config(tmp_path):
    """`edgerun serve --config ROOT`: the active slot's model, arena planned for the slots."""
    root = _device_root(tmp_path)
    with served_process("--config", root, "--parallel", "3") as (proc, base):
        r = client(base).completions.create(model=MODEL, prompt="0012+0034=", max_tokens=8, temperature=0)
        assert r.choices[0].text == "64000"
        assert httpx.get(f"{base}/health").json()["slots"] == 3


def test_serve_device_config_budget(tmp_path):
    import edgerun
    from edgerun.serve.device import open_model
    root = _device_root(tmp_path, budget_mib=0.5)
    with pytest.raises(edgerun.errors.ConfigError, match="arena.budget_mib: serving edgerun-add.gguf with 4 slot"):
        open_model(root, 4)
    with pytest.raises(edgerun.errors.FileAccessError, match="no active slot"):
        open_model(tmp_path / "rootfs-a", 1)
