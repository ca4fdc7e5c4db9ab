"""sw-description in libconfig syntax: write it from Python values, read it back.

The writer maps dict -> group `{ name = value; }`, list of dicts -> list
`( {...}, {...} )`, list of scalars -> array `[ a, b ]`, str/int/bool -> scalars.
The reader accepts the libconfig grammar SWUpdate's default parser accepts
(settings with `=` or `:`, optional `;`/`,` terminators, comments `#`, `//` and
`/* */`, adjacent strings concatenated, decimal/hex integers, floats, booleans)
and returns the same Python shapes, so edgerun.ota can check a bundle's images
against the very text that was signed.
"""
import re

_NAME = re.compile(r"[A-Za-z*][-A-Za-z0-9_*]*\Z")


class SwDescriptionError(ValueError):
    pass


def _q(s):
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v, ind):
    pad = "  " * ind
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _q(v)
    if isinstance(v, dict):
        body = "".join(f"{pad}  {_setting(k, x, ind + 1)}\n" for k, x in v.items())
        return "{\n" + body + pad + "}"
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, dict) for x in v):
            items = ",\n".join(f"{pad}  {_value(x, ind + 1)}" for x in v)
            return "(\n" + items + "\n" + pad + ")"
        if all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v):
            return "[ " + ", ".join(_value(x, ind) for x in v) + " ]"
        raise SwDescriptionError(f"cannot write a mixed list: {v!r}")
    raise SwDescriptionError(f"cannot write {type(v).__name__} values")


def _setting(name, v, ind):
    if not _NAME.match(name):
        raise SwDescriptionError(f"{name!r} is not a valid libconfig setting name")
    return f"{name} = {_value(v, ind)};"


def render(root_name, group):
    """Text of one top-level setting, e.g. render("software", {...})."""
    return _setting(root_name, group, 0) + "\n"


# ------------------------------------------------------------------ reader

_TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*|//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>[-+]?(?:0[xX][0-9A-Fa-f]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)L{0,2})
  | (?P<name>[A-Za-z*][-A-Za-z0-9_*]*)
  | (?P<punct>[=:;,{}()\[\]])
""", re.S | re.X)

_ESC = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "\\": "\\", '"': '"'}


def _unquote(tok, line):
    s, out, i = tok[1:-1], [], 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            n = s[i + 1]
            if n in _ESC:
                out.append(_ESC[n])
                i += 2
                continue
            if n == "x" and re.match(r"[0-9A-Fa-f]{2}", s[i + 2:i + 4]):
                out.append(chr(int(s[i + 2:i + 4], 16)))
                i += 4
                continue
            raise SwDescriptionError(f"line {line}: bad escape \\{n} in a string")
        out.append(c)
        i += 1
    return "".join(out)


def _tokens(text):
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise SwDescriptionError(f"line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        tok = m.group()
        if kind != "ws":
            yield kind, tok, line
        line += tok.count("\n")
        pos = m.end()
    yield "eof", "", line


class _Parser:
    def __init__(self, text):
        self.toks = list(_tokens(text))
        self.i = 0

    def peek(self):
        return self.toks[self.i]

    def take(self, want=None):
        kind, tok, line = self.toks[self.i]
        if want is not None and tok != want:
            raise SwDescriptionError(f"line {line}: expected {want!r}, found {tok or 'end of file'!r}")
        self.i += 1
        return kind, tok, line

    def settings(self, end):
        out = {}
        while self.peek()[1] != end or (end == "" and self.peek()[0] != "eof"):
            kind, name, line = self.take()
            if kind != "name":
                raise SwDescriptionError(f"line {line}: expected a setting name, found {name!r}")
            sep = self.take()
            if sep[1] not in ("=", ":"):
                raise SwDescriptionError(f"line {sep[2]}: expected '=' or ':' after {name}")
            if name in out:
                raise SwDescriptionError(f"line {line}: setting {name!r} appears twice in one group")
            out[name] = self.value()
            if self.peek()[1] in (";", ","):
                self.take()
        return out

    def value(self):
        kind, tok, line = self.take()
        if tok == "{":
            v = self.settings("}")
            self.take("}")
            return v
        if tok in ("(", "["):
            close = ")" if tok == "(" else "]"
            items = []
            while self.peek()[1] != close:
                items.append(self.value())
                if self.peek()[1] == ",":
                    self.take()
                elif self.peek()[1] != close:
                    raise SwDescriptionError(f"line {self.peek()[2]}: expected ',' or {close!r}")
            self.take(close)
            return items
        if kind == "str":
            s = _unquote(tok, line)
            while self.peek()[0] == "str":     # "a" "b" is "ab" in libconfig
                _, t2, l2 = self.take()
                s += _unquote(t2, l2)
            return s
        if kind == "num":
            t = tok.rstrip("L")
            if re.fullmatch(r"[-+]?0[xX][0-9A-Fa-f]+", t):
                return int(t, 16)
            if re.fullmatch(r"[-+]?\d+", t):
                return int(t)
            return float(t)
        if kind == "name" and tok.lower() in ("true", "false"):
            return tok.lower() == "true"
        raise SwDescriptionError(f"line {line}: expected a value, found {tok or 'end of file'!r}")


def parse(text):
    """{top-level name: value} of a libconfig document."""
    p = _Parser(text)
    out = p.settings("")
    p.take("")
    return out
