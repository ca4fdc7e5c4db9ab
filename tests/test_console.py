"""The console layer (edgerun/console.py, rich): bars and tables on a terminal,
and on a pipe exactly the plain text the other tests pin.

A terminal here is a pseudo-terminal the command's stdout and stderr both go
to, so what a person would see is what the test reads.
"""
import json
import os
import pty
import re
import select
import subprocess
import sys

import pytest

from edgerun import console

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_terminal(args, env=None, timeout=600):
    """(exit status, output) of `python -m edgerun ARGS` with a terminal for stdout and stderr."""
    env = dict({k: v for k, v in os.environ.items() if k != "EDGERUN_PLAIN"}, COLUMNS="160", LINES="50",
               **(env or {}))
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "edgerun", *args], stdin=slave, stdout=slave, stderr=slave,
                         env=env, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            p.kill()
            break
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:            # the other side closed: the command is done
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(), out.decode("utf-8", "replace").replace("\r\n", "\n")


def piped(args):
    r = subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def test_off_a_terminal_nothing_is_drawn(capsys):
    assert not console.is_terminal(sys.stdout) or os.isatty(1)
    with console.progress("x", total=3) as bar:
        assert not bar.on
        bar.advance(1, "one")
        bar.update(completed=3)
        bar.note("a line")
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


@pytest.mark.parametrize("verb", [["doctor"], ["boards"], ["info"]])
def test_tables_on_a_terminal(verb):
    rc_t, tty = on_terminal(verb)
    rc_p, out, _ = piped(verb)
    assert rc_t == rc_p, tty
    assert "─" in tty, tty                  # rich's header rule
    assert "─" not in out and not ANSI.search(out)
    # the same facts either way: every first word of a piped row is in the table
    plain_tty = ANSI.sub("", tty)
    for line in out.splitlines():
        words = line.split()
        if words and not line.startswith(("edgerun", "`edgerun")) and not words[0].endswith(":") \
                and words[0] != "board":
            assert words[0] in plain_tty, (words[0], plain_tty)


@pytest.mark.parametrize("verb", [["doctor", "--json"], ["boards", "--json"], ["info", "--json"]])
def test_json_stays_plain_on_a_terminal(verb):
    rc_t, tty = on_terminal(verb)
    rc_p, out, _ = piped(verb)
    assert rc_t == rc_p
    assert json.loads(tty) == json.loads(out)


def test_edgerun_plain_turns_the_terminal_drawing_off():
    rc, tty = on_terminal(["boards"], env={"EDGERUN_PLAIN": "1"})
    _, out, _ = piped(["boards"])
    assert rc == 0 and tty == out


def test_convert_bar_on_a_terminal_and_not_on_a_pipe(tiny, tmp_path):
    d, _, _ = tiny.hf("llama_tied")
    rc, tty = on_terminal(["convert", str(d), str(tmp_path / "t.gguf"), "--type", "q8_0"])
    assert rc == 0, tty
    assert "convert q8_0" in tty and "%" in tty, tty          # the bar, with its label and share
    assert "edgerun: wrote" in tty
    rc, out, err = piped(["convert", str(d), str(tmp_path / "p.gguf"), "--type", "q8_0"])
    assert rc == 0 and not ANSI.search(out + err) and "convert q8_0" not in err
    assert out.startswith("edgerun: wrote")


def test_nested_bars_share_one_display(tmp_path):
    """A bar opened while another shows (a build inside a board test) is a
    second line of the same display, not an error."""
    code = ("from edgerun import console\n"
            "with console.progress('outer', total=2) as a:\n"
            "    for i in range(2):\n"
            "        with console.progress('inner', total=10, unit='bytes') as b:\n"
            "            b.advance(5, 'half')\n"
            "        a.advance(1)\n"
            "        a.note(f'row {i}')\n"
            "print('done')\n")
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    text = ANSI.sub("", out.decode())
    assert p.wait() == 0, text
    assert "row 0" in text and "row 1" in text and "done" in text and "inner" in text
