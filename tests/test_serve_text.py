"""Text through `edgerun serve` on a real pretrained model (babyllama,
SentencePiece, ../shared/data) and a real published chat template (Qwen2.5):
a completion is exactly the text that continues the prompt (leading space
kept: prompt + completion reads as the whole), a chat reply is exactly what
edgerun.chat gives for the same messages, and streamed equals plain."""
import pytest

from serve_helpers import client, need_serve, served

need_serve()
MESSAGES = [{"role": "system", "content": "You tell short stories."},
            {"role": "user", "content": "Tell me about a cat."}]


@pytest.fixture(scope="module")
def baby(shared_data):
    path = shared_data / "models" / "babyllama-tok105" / "babyllama-tok105-f32.gguf"
    template = (shared_data / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
    if not path.is_file():
        pytest.skip("babyllama is not in ../shared/data")
    return path, template


@pytest.fixture(scope="module")
def server(baby):
    path, template = baby
    with served(path, parallel=2, chat_template=template) as (srv, base):
        yield base


def test_completion_continues_the_prompt(baby, server):
    import edgerun
    path, _ = baby
    prompt = "Once upon a time,"
    with edgerun.Model(path) as m:
        ids = m.tokenizer.encode(prompt)
        gen = m.generate(ids, max_tokens=40)
        whole = m.tokenizer.decode(ids + gen, skip_special=True)
        head = m.tokenizer.decode(ids, skip_special=True)
    assert whole.startswith(head)
    want = whole[len(head):]
    api = client(server)
    r = api.completions.create(model=path.stem, prompt=prompt, max_tokens=40, temperature=0)
    assert r.choices[0].text == want
    assert want.startswith(" ")             # the space between "time" and the next word
    streamed = "".join(c.choices[0].text for c in api.completions.create(
        model=path.stem, prompt=prompt, max_tokens=40, temperature=0, stream=True))
    assert streamed == want


def test_chat_matches_edgerun_chat(baby, server):
    import edgerun
    from edgerun.chat import chat
    path, template = baby
    with edgerun.Model(path) as m:
        want = chat(m, MESSAGES, chat_template=template, max_tokens=30)
    api = client(server)
    r = api.chat.completions.create(model=path.stem, messages=MESSAGES, max_tokens=30, temperature=0)
    assert r.choices[0].message.content == want
    streamed = "".join(c.choices[0].delta.content or "" for c in api.chat.completions.create(
        model=path.stem, messages=MESSAGES, max_tokens=30, temperature=0, stream=True) if c.choices)
    assert streamed == want
    assert r.usage.prompt_tokens > 20       # the template's system and user turns, rendered and tokenized
