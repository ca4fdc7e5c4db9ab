"""The conversation saved beside a session snapshot: FILE.chat.json, written
atomically, naming the snapshot's SHA-256 so a pair from two saves is
refused."""
import hashlib
import json
import os
import pathlib

from .. import errors

SUFFIX = ".chat.json"
FORMAT, VERSION = "edgerun-chat", 1


def path_of(path):
    """Where the conversation of the session snapshot at `path` is kept."""
    p = pathlib.Path(os.fspath(path))
    return p.with_name(p.name + SUFFIX)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def encode(doc):
    """The conversation `doc` as JSON bytes, or InvalidArgumentError."""
    try:
        return json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise errors.InvalidArgumentError(f"the conversation cannot be saved as JSON: {e}", -1) from None


def write(path, doc):
    """Writes the conversation `doc` to `path` as JSON, atomically."""
    write_atomic(path, encode(doc))


def write_atomic(path, data):
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise errors.FileAccessError(f"{path}: {e.strerror or e}", -2) from None
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def parse(raw, side):
    def bad(why):
        return errors.CorruptModelError(f"{side}: not an edgerun chat conversation file ({why}); "
                                        "load one that /save (ChatSession.save) wrote", -3)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise bad("no 'format': 'edgerun-chat'")
    if doc.get("version") != VERSION:
        raise errors.UnsupportedError(
            f"{side}: chat file version {doc.get('version')!r}; this edgerun reads version {VERSION}", -4)
    checks = {"model_fingerprint": str, "snapshot_sha256": str, "template": str, "variables": dict,
              "messages": list, "tokens": list}
    for key, typ in checks.items():
        if not isinstance(doc.get(key), typ):
            raise bad(f"'{key}' missing or not a {typ.__name__}")
    if doc.get("tools") is not None and not isinstance(doc["tools"], list):
        raise bad("'tools' is not a list")
    if not all(isinstance(m, dict) for m in doc["messages"]):
        raise bad("a message is not an object")
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in doc["tokens"]):
        raise bad("a token id is not an integer >= 0")
    if not isinstance(doc.get("totals", {}), dict):
        raise bad("'totals' is not an object")
    return doc
