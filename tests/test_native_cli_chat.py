"""`edgerun-cli chat`: the built-in formats render exactly what the models' own
templates render (edgerun.chat.render on ../shared/data/chat_templates), a real
chat through a pipe reuses the cache's prefix on its second turn, and bad
input gets one error line.

The binary comes from $EDGERUN_CLI or build/native/runtime_c/tools/edgerun-cli;
tests skip without it.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from edgerun.chat import render

REPO = pathlib.Path(__file__).resolve().parent.parent
DATE = "02 Dec 2026"
TEMPLATES = {"chatml": "Qwen-Qwen2.5-7B-Instruct.jinja",
             "llama3": "meta-llama-Llama-3.2-3B-Instruct.jinja",
             "gemma": "google-gemma-2-2b-it.jinja"}
BOS = {"chatml": None, "llama3": "<|begin_of_text|>", "gemma": "<bos>"}
# Three user turns, two replies; spaces around the text show which formats trim.
TURNS = [" Hi there ", "Hello! How can I help?", "What is 2+2? ", "  It is 4.", "Ünïcode ✓ and more"]
STATS = re.compile(r"^edgerun-cli: turn (\d+): prompt (\d+) tok, reused (\d+), prefilled (\d+), "
                   r"generated (\d+) tok \(([a-z ]+)\) \| prefill [\d.]+ tok/s \| decode [\d.]+ tok/s")


@pytest.fixture(scope="module")
def cli():
    p = os.environ.get("EDGERUN_CLI")
    p = pathlib.Path(p) if p else REPO / "build" / "native" / "runtime_c" / "tools" / "edgerun-cli"
    if not p.is_file():
        pytest.skip(f"{p} is not built (make build)")
    return p


@pytest.fixture(scope="module")
def babyllama(shared_data):
    p = shared_data / "models" / "babyllama-tok105" / "babyllama-tok105-f32.gguf"
    if not p.is_file():
        pytest.skip(f"{p} is absent")
    return p


def chat(cli, *args, stdin="", timeout=120):
    return subprocess.run([str(cli), "chat", *map(str, args)], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(r):
    assert r.returncode != 0, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgerun-cli: error: "), r.stderr
    return lines[0]


def messages(fmt, system):
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(TURNS)]
    if system is None:
        return msgs
    if fmt == "gemma":  # Gemma's template refuses a system role: it leads the first user turn
        msgs[0] = {"role": "user", "content": system + "\n\n" + msgs[0]["content"]}
        return msgs
    return [{"role": "system", "content": system}] + msgs


@pytest.mark.parametrize("system", [None, " Be brief. "])
@pytest.mark.parametrize("fmt", sorted(TEMPLATES))
def test_print_prompt_matches_template(cli, shared_data, fmt, system):
    template = (shared_data / "chat_templates" / TEMPLATES[fmt]).read_text()
    want = render(template, messages(fmt, system), add_generation_prompt=True, bos_token=BOS[fmt],
                  date_string=DATE)
    args = ["--print-prompt", "--chat-format", fmt, "--date", DATE]
    if system is not None:
        args += ["--system", system]
    r = chat(cli, *args, stdin="".join(t + "\n" for t in TURNS))
    assert r.returncode == 0, r.stderr
    assert r.stdout == want


def test_gemma_template_refuses_system(shared_data):
    """Why gemma folds --system into the first turn: its own template raises."""
    template = (shared_data / "chat_templates" / TEMPLATES["gemma"]).read_text()
    with pytest.raises(Exception, match="System role not supported"):
        render(template, [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}], bos_token="<bos>")


def _with_template(src, dst, template_text):
    """A copy of src with a tokenizer.chat_template key, by gguf-py's own script."""
    tfile = dst.with_suffix(".jinja")
    tfile.write_text(template_text)
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(src), str(dst),
                    "--chat-template-file", str(tfile), "--force"], check=True, capture_output=True)
    return dst


def test_chat_through_pipe_reuses_prefix(cli, babyllama):
    stdin = "once upon a time\nthe cat sat\n/reset\nonce upon a time\n/quit\nnot read\n"
    r = chat(cli, babyllama, "--chat-format", "chatml", "--ctx", "512", "-n", "6", "-t", "1", stdin=stdin)
    assert r.returncode == 0, r.stderr
    stats = [STATS.match(line) for line in r.stderr.splitlines() if line.startswith("edgerun-cli: turn")]
    assert all(stats) and len(stats) == 3, r.stderr
    (t1, p1, u1, f1, g1, _), (t2, p2, u2, f2, g2, _), (t3, p3, u3, f3, g3, _) = \
        [tuple(int(x) if x.isdigit() else x for x in m.groups()) for m in stats]
    assert (t1, t2, t3) == (1, 2, 3)
    assert u1 == 0 and f1 == p1                       # first turn: nothing cached
    assert f2 < p2 and u2 + f2 == p2 and u2 > p1 // 2  # second turn: the first turn's prefix is reused
    assert u3 == 0 and f3 == p3 == p1                 # after /reset: everything again, the same prompt
    assert "conversation reset" in r.stderr
    assert len(r.stdout.splitlines()) == 3            # one reply line per turn; nothing after /quit


def test_chat_slides_context(cli, babyllama):
    """A reply longer than the context is left keeps going with --ctx-strategy
    slide; with fail it stops at the full context. Later turns still run: the
    oldest turns leave the rendered conversation."""
    stdin = "".join(f"tell me story {i}\n" for i in range(3))
    common = ["--chat-format", "chatml", "--ctx", "256", "--keep", "16", "-n", "150", "-t", "1", "--ignore-eos"]
    for strategy in ("slide", "fail"):
        r = chat(cli, babyllama, *common, "--ctx-strategy", strategy, stdin=stdin)
        assert r.returncode == 0, r.stderr
        stats = [STATS.match(line) for line in r.stderr.splitlines() if STATS.match(line)]
        assert len(stats) == 3, r.stderr
        for m in stats:
            prompt, gen, stop = int(m.group(2)), int(m.group(5)), m.group(6)
            if strategy == "slide":
                assert gen == 150 and prompt + gen > 256 and stop == "limit", r.stderr
            else:
                # the last token is sampled from the logits at position 256, not decoded
                assert prompt + gen == 256 + 1 and stop == "context full", r.stderr


def test_format_detected_from_template(cli, babyllama, shared_data, tmp_path):
    llama = _with_template(babyllama, tmp_path / "llama3.gguf",
                           (shared_data / "chat_templates" / TEMPLATES["llama3"]).read_text())
    r = chat(cli, llama, "--print-prompt", "--date", DATE, stdin="hello\n")
    assert r.returncode == 0, r.stderr
    assert "<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>" in r.stdout
    assert "Today Date: " + DATE in r.stdout

    odd = _with_template(babyllama, tmp_path / "odd.gguf", "{% for m in messages %}{{ m.content }}{% endfor %}")
    line = one_line_error(chat(cli, odd, stdin="hello\n"))
    assert "--chat-format" in line
    r = chat(cli, odd, "--chat-format", "chatml", "-n", "2", "-t", "1", stdin="hello\n")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B.jinja", "HuggingFaceTB-SmolLM3-3B.jinja",
                                  "LFM2.5-Instruct.jinja"])
def test_other_chatml_templates_are_refused(cli, babyllama, shared_data, tmp_path, name):
    """ChatML markers alone do not say what a template renders: each of these
    renders its own system turn (or none), so rendering Qwen2.5's in their
    place would chat in a format the model never saw. Refused, pointing to
    the Python chat, which renders the template itself."""
    template = (shared_data / "chat_templates" / name).read_text()
    system = render(template, [{"role": "user", "content": "hi"}], add_generation_prompt=True, bos_token="<s>")
    assert "You are Qwen, created by Alibaba Cloud" not in system
    line = one_line_error(chat(cli, _with_template(babyllama, tmp_path / "t.gguf", template), stdin="hi\n"))
    assert "edgerun chat" in line and "--chat-format" in line


def test_plain_chatml_template_is_detected(cli, babyllama, tmp_path):
    """The bare ChatML template (a system turn only when there is a system
    message), however its whitespace, quotes and newlines are spelled."""
    from chat_helpers import CHATML
    spelled = CHATML.replace("'", '"').replace("\n", "\\n").replace("{{ ", "{{")
    for i, template in enumerate((CHATML, spelled)):
        path = _with_template(babyllama, tmp_path / f"plain{i}.gguf", template)
        for system in (None, "be kind"):
            msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": "hello"}]
            want = render(template, msgs, add_generation_prompt=True)
            r = chat(cli, path, "--print-prompt", *(["--system", system] if system else []), stdin="hello\n")
            assert r.returncode == 0, r.stderr
            assert r.stdout == want and ("<|im_start|>system" in want) == bool(system)
    r = chat(cli, "--print-prompt", "--chat-format", "chatml-plain", stdin="hello\n")
    assert r.returncode == 0 and r.stdout == render(CHATML, [{"role": "user", "content": "hello"}],
                                                    add_generation_prompt=True)


def test_bad_input(cli, shared_data):
    model = REPO / "models" / "edgerun-add.gguf"
    if not model.is_file():
        pytest.skip(f"{model} is absent")
    line = one_line_error(chat(cli, model, "--chat-format", "vicuna", stdin="hi\n"))
    assert "vicuna" in line
    line = one_line_error(chat(cli, model, stdin="hi\n"))        # a file without a chat template
    assert "--chat-format" in line
    r = subprocess.run([str(cli), "run", str(model), "hi", "--system", "x"], capture_output=True, text=True)
    one_line_error(r)


@pytest.fixture(scope="module")
def chat_gguf(tmp_path_factory):
    from chat_helpers import chat_model_path
    return chat_model_path(tmp_path_factory)


def test_replies_match_transformers(cli, chat_gguf):
    """The tiny ChatML model (tests/chat_helpers.py): the format comes from the
    file's template, each greedy reply equals transformers' on the same
    conversation, and every later turn reuses at least the previous prompt."""
    from chat_helpers import ANSWERS, Reference
    qs = ["hello", "how are you", "bye"]
    r = chat(cli, chat_gguf, "--system", "be kind", "-n", "32", "-t", "1", stdin="".join(q + "\n" for q in qs))
    assert r.returncode == 0, r.stderr
    replies = r.stdout.splitlines()
    assert len(replies) == 3, r.stdout
    ref = Reference(chat_gguf)
    msgs = [{"role": "system", "content": "be kind"}]
    for q, got in zip(qs, replies):
        msgs.append({"role": "user", "content": q})
        assert got == ref.reply(msgs, max_tokens=32) == ANSWERS[q]
        msgs.append({"role": "assistant", "content": got})
    stats = [STATS.match(line).groups() for line in r.stderr.splitlines() if STATS.match(line)]
    assert [s[5] for s in stats] == ["end of turn"] * 3, r.stderr
    for prev, cur in zip(stats, stats[1:]):
        p_prev, u_cur, f_cur, p_cur = int(prev[1]), int(cur[2]), int(cur[3]), int(cur[1])
        assert u_cur >= p_prev and f_cur < p_cur - p_prev, r.stderr


def test_model_meta_str(chat_gguf):
    """er_model_meta_str: the template text as gguf-py reads it; an absent key
    and a key of another type are ER_EINVAL with a message naming the key."""
    import gguf

    import edgerun
    from edgerun._ffi import ffi, lib
    reader = gguf.GGUFReader(str(chat_gguf))
    want = reader.fields["tokenizer.chat_template"].contents()
    with edgerun.Model(chat_gguf, n_ctx=64, n_threads=1) as m:
        ptr, n = ffi.new("const char **"), ffi.new("size_t *")
        assert lib.er_model_meta_str(m._ptr, b"tokenizer.chat_template", ptr, n) == 0
        assert ffi.unpack(ptr[0], n[0]).decode() == want
        for key in (b"no.such.key", b"qwen2.context_length"):
            assert lib.er_model_meta_str(m._ptr, key, ptr, n) == lib.ER_EINVAL
            assert key.decode() in ffi.string(lib.er_last_error()).decode()
        assert lib.er_model_meta_str(ffi.NULL, b"x", ptr, n) == lib.ER_EINVAL


@pytest.mark.parametrize("fam", ["qwen3", "lfm2"])
def test_refused_truncate_prefills_all(cli, shared_data, fam):
    """Turn 2 drops turn 1 (the context is full), so the cache must go back to
    the system prompt: qwen3 cuts back and reuses it; lfm2's convolution ring
    cannot go back that far (ER_EUNSUPPORTED), so the chat resets and
    prefills the whole prompt instead of failing."""
    from family_files import llamacpp_file
    path = llamacpp_file(shared_data, fam)
    r = chat(cli, path, "--chat-format", "chatml", "--system", "hi", "--ctx", "64", "-n", "30", "--ignore-eos",
             "-t", "1", stdin="hello\nmore\n")
    assert r.returncode == 0, r.stderr
    stats = [STATS.match(line).groups() for line in r.stderr.splitlines() if STATS.match(line)]
    assert len(stats) == 2 and stats[0][5] == "context full", r.stderr
    prompt, reused, prefilled = int(stats[1][1]), int(stats[1][2]), int(stats[1][3])
    assert reused + prefilled == prompt
    if fam == "lfm2":
        assert reused == 0, r.stderr
    else:
        assert 0 < reused < prompt, r.stderr
