"""`edgerun chat` driven through a real pseudo-terminal: what a person types
goes in as keystrokes (Enter, Ctrl-C, Ctrl-D through the terminal's line
discipline, so Ctrl-C is a real SIGINT), and the test reads the screen."""
import os
import pty
import re
import select
import signal
import sys
import time

import pytest

import edgerun
from chat_helpers import chat_model_path, rambler_path

pytest.importorskip("transformers")
pytest.importorskip("torch")

# The package the tests import (a checkout's pybind/ or an installed one) runs in the terminal too.
PACKAGE_DIR = str(__import__("pathlib").Path(edgerun.__file__).resolve().parent.parent)
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]")


class Terminal:
    def __init__(self, args):
        env = dict(os.environ, TERM="xterm", PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_DIR, env.get("PYTHONPATH")) if p)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:                                    # the child: edgerun chat on the terminal
            try:
                # as a shell starts a foreground job: a suite run in the
                # background (`make test &`) ignores SIGINT, which exec
                # would pass on, and Ctrl-C would then do nothing
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.execve(sys.executable, [sys.executable, "-m", "edgerun", "chat", *args], env)
            finally:
                os._exit(127)
        self.raw = b""
        self.mark = 0

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:                                      # EIO: the child closed the terminal
            return None
        if not data:
            return None
        self.raw += data
        return True

    def screen(self):
        return _ESCAPES.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    def expect(self, pattern, timeout=120):
        """Waits until `pattern` shows on the screen after the last match."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while True:
            m = rx.search(self.screen(), self.mark)
            if m:
                self.mark = m.end()
                return m
            left = end - time.monotonic()
            if left <= 0 or self._read(min(left, 0.2)) is None and not rx.search(self.screen(), self.mark):
                raise AssertionError(f"{pattern!r} did not show; the screen:\n{self.screen()[-3000:]}")

    def type(self, text):
        os.write(self.fd, text.encode())

    def exit_status(self, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self._read(0.1)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        raise AssertionError(f"edgerun chat did not exit; the screen:\n{self.screen()[-3000:]}")

    def kill(self):
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@pytest.fixture
def term():
    started = []

    def start(*args):
        t = Terminal([str(a) for a in args])
        started.append(t)
        return t
    yield start
    for t in started:
        t.kill()


PROMPT = r"\n> "


def test_a_conversation_in_the_terminal(tmp_path_factory, tmp_path, term):
    model = chat_model_path(tmp_path_factory)
    t = term(model, "--system", "be kind", "--ctx", "256", "--threads", "1")
    t.expect(r"edgerun chat: chat\.gguf, context 256 tokens.*Ctrl-D quits\.")
    t.expect(r"> ")
    t.type("hello\r")
    t.expect(r"hello\nhi there" + PROMPT)                   # the echo, then the reply, then a prompt
    t.type("how are you\r")
    t.expect(r"how are you\nfine thanks" + PROMPT)
    t.type("/stats\r")
    m = t.expect(r"tokens: (\d+) in the cache of 256 \([\d.]+% used\); 2 turns, 5 messages\n"
                 r"prefilled (\d+) tokens \(reused (\d+) from the cache\), generated (\d+)\n"
                 r"prefill [\d.]+ tok/s; decode [\d.]+ tok/s\n"
                 r"last turn: (\d+) prompt tokens \((\d+) reused, (\d+) prefilled in [\d.]+ ms\), \d+ generated, "
                 r"stopped: eos")
    cached, prefilled, reused = int(m[1]), int(m[2]), int(m[3])
    n_prompt, last_reused, last_prefilled = int(m[5]), int(m[6]), int(m[7])
    assert last_reused > 0 and last_reused + last_prefilled == n_prompt     # the second turn reused the first
    assert reused == last_reused and prefilled < n_prompt + cached
    snap = tmp_path / "talk.snap"
    t.type(f"/save {snap}\r")
    t.expect(r"\(saved .*talk\.snap, [\d.]+ \w+, and .*talk\.snap\.chat\.json\)")
    assert snap.exists() and (tmp_path / "talk.snap.chat.json").exists()
    t.type("/reset\r")
    t.expect(r"\(conversation cleared\)")
    t.type(f"/load {snap}\r")
    t.expect(r"\(loaded .*talk\.snap: 5 messages, \d+ tokens\)")
    t.type("bye\r")
    t.expect(r"bye\nsee you later" + PROMPT)
    t.type(f"/load {tmp_path / 'missing.snap'}\r")
    t.expect(r"edgerun: error: .*missing\.snap\.chat\.json: no such file")
    t.type("/nope\r")
    t.expect(r"unknown command /nope; /help lists them")
    t.type("\x03")                                           # Ctrl-C at the prompt: a fresh line, still running
    t.expect(r"\(Ctrl-D quits\)")
    t.type("\x04")                                           # Ctrl-D: quits
    assert t.exit_status() == 0
    assert "Traceback" not in t.screen()


def test_ctrl_c_stops_the_reply_and_keeps_the_chat(tmp_path_factory, term):
    model = rambler_path(tmp_path_factory)                   # answers, then never ends its turn
    t = term(model, "--ctx", "16384", "-n", "16000", "--threads", "1")
    t.expect(r"Ctrl-D quits\.")
    t.expect(r"> ")
    started = time.monotonic()
    t.type("hello\r")
    t.expect(r"hello\nhi there")                            # the reply is streaming...
    t.type("\x03")                                           # ...and Ctrl-C stops it
    t.expect(r" \[stopped\]" + PROMPT, timeout=60)
    stopped_after = time.monotonic() - started
    t.type("/stats\r")
    m = t.expect(r"1 turns, 2 messages\n.*generated (\d+)\n.*\n.*stopped: interrupted")
    assert int(m[1]) < 16000
    t.type("/reset\r")                                       # the program is alive and answers commands
    # wait for the next prompt: a Ctrl-D typed before it was once lost on a
    # loaded machine (the chat never quit)
    t.expect(r"\(conversation cleared\)\n>")
    t.type("\x04")
    assert t.exit_status() == 0
    assert "Traceback" not in t.screen()
    assert stopped_after < 60


def test_ctrl_c_between_two_lines_keeps_the_chat(monkeypatch):
    """A Ctrl-C can land after a command's output and before input() reads
    again (a user quick on the keys; once in a full `make test` the pty test
    above typed it there). The chat says how to quit and goes on, as at the
    prompt, instead of ending with "edgerun: interrupted"."""
    import builtins
    import io
    from edgerun.cli import chat as cli_chat
    lines = iter(["/first", "/second"])

    def read(prompt=""):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    seen = []

    def command(chat, line, out):
        seen.append(line)
        out.write(f"did {line}\n")
        if line == "/first":
            raise KeyboardInterrupt     # the signal, just as the output ends
    monkeypatch.setattr(builtins, "input", read)
    monkeypatch.setattr(cli_chat, "command", command)
    out = io.StringIO()
    try:
        rc = cli_chat.loop(chat=None, gen_kw={}, out=out)
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C between two lines ended the chat")
    assert rc == 0
    assert seen == ["/first", "/second"]
    assert out.getvalue() == "did /first\n\n(Ctrl-D quits)\ndid /second\n\n"


def test_without_a_template_it_says_how_to_pass_one(term):
    t = term()                                               # the embedded model has no template
    assert t.exit_status() == 1
    assert re.search(r"edgerun: error: edgerun-add\.gguf carries no chat template.*--chat-template FILE",
                     t.screen().replace("\n", ""))


def test_template_from_a_file_and_piped_input(tmp_path_factory, tmp_path):
    """--chat-template takes a .jinja file or a tokenizer_config.json; --var
    reaches the template; stdin may be a pipe (a script driving the chat)."""
    import subprocess
    model = chat_model_path(tmp_path_factory)
    plain = model.parent / "chat-plain.gguf"                  # the same weights, no template in the file
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (PACKAGE_DIR, os.environ.get("PYTHONPATH")) if p))

    def chat(*args, stdin="hello\n"):
        return subprocess.run([sys.executable, "-m", "edgerun", "chat", str(plain), "--ctx", "256", *map(str, args)],
                              input=stdin, capture_output=True, text=True, env=env, timeout=300)
    for source in (model.parent / "chatml.jinja", model.parent / "hf" / "tokenizer_config.json"):
        r = chat("--chat-template", source)
        assert r.returncode == 0, r.stderr
        assert "> hi there\n" in r.stdout
    shouty = tmp_path / "t.jinja"
    shouty.write_text("{{ '<|im_start|>user\\n' + messages[-1]['content'] + (suffix if suffix is defined else '') "
                      "+ '<|im_end|>\\n<|im_start|>assistant\\n' }}")
    r = chat("--chat-template", shouty, "--var", 'suffix=" how are you"', "--var", "n=3", "-n", "8",
             stdin="hello\n/stats\n")
    assert r.returncode == 0, r.stderr
    assert re.search(r"last turn: (\d+) prompt tokens", r.stdout)
    r = chat()
    assert r.returncode == 1 and "carries no chat template" in r.stderr and "--chat-template FILE" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"bos_token": "<s>"}')
    r = chat("--chat-template", bad)
    assert r.returncode == 1 and 'no "chat_template"' in r.stderr
    r = chat("--var", "no-equals")
    assert r.returncode == 1 and "NAME=VALUE" in r.stderr
    raising = tmp_path / "raise.jinja"
    raising.write_text("{{ raise_exception('only one turn, please') if messages | length > 1 else "
                       "'<|im_start|>user\\n' + messages[0]['content'] + '<|im_end|>\\n<|im_start|>assistant\\n' }}")
    r = chat("--chat-template", raising, stdin="hello\nagain\n")
    assert r.returncode == 0 and "hi there" in r.stdout
    assert "edgerun: error: the chat template failed: only one turn, please" in r.stderr
