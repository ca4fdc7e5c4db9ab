"""One string value from a GGUF file's metadata, read in pure Python.

The chat template travels in the file (`tokenizer.chat_template`), but the C
runtime has no use for it and no entry point that returns metadata strings;
gguf-py is a conversion dependency that a board does not carry. The walk below
reads only the key/value section: fixed-size values and arrays are skipped by
arithmetic, arrays of strings one length at a time. Every read is bounds
checked, so a damaged file is refused (CorruptModelError), never misread.
"""
import mmap
import os
import struct

from .. import errors

_MAGIC = b"GGUF"
_STRING, _ARRAY = 8, 9
# GGUF value type -> size in bytes of the fixed-size ones.
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class _Reader:
    def __init__(self, buf, path):
        self.buf, self.pos, self.path = buf, 0, path

    def need(self, n, what):
        if n < 0 or self.pos + n > len(self.buf):
            raise errors.CorruptModelError(
                f"{self.path}: GGUF metadata is truncated at byte {self.pos} ({what} needs {n} bytes)", -3)

    def u32(self, what):
        self.need(4, what)
        v, = struct.unpack_from("<I", self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self, what):
        self.need(8, what)
        v, = struct.unpack_from("<Q", self.buf, self.pos)
        self.pos += 8
        return v

    def string(self, what):
        n = self.u64(what)
        self.need(n, what)
        s = self.buf[self.pos:self.pos + n]
        self.pos += n
        return s

    def skip_string(self, what):
        n = self.u64(what)
        self.need(n, what)
        self.pos += n

    def skip_value(self, vtype, key):
        if vtype in _FIXED:
            self.need(_FIXED[vtype], key)
            self.pos += _FIXED[vtype]
        elif vtype == _STRING:
            self.skip_string(key)
        elif vtype == _ARRAY:
            etype, count = self.u32(key), self.u64(key)
            if etype in _FIXED:
                self.need(_FIXED[etype] * count, key)
                self.pos += _FIXED[etype] * count
            elif etype == _STRING:
                for _ in range(count):
                    self.skip_string(key)
            else:
                # Nested arrays are legal GGUF but no key we know holds one.
                raise errors.CorruptModelError(
                    f"{self.path}: metadata {key!r} is an array of type {etype}, which edgerun does not read", -3)
        else:
            raise errors.CorruptModelError(f"{self.path}: metadata {key!r} has unknown value type {vtype}", -3)


def read_string(path, key):
    """The string value of metadata `key` in the GGUF file at `path`, or None
    when the file has no such key. CorruptModelError when the file is not a
    GGUF v3 file or its metadata is damaged, or the key holds no string."""
    path = os.fspath(path)
    want = key.encode()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 24:
            raise errors.CorruptModelError(f"{path}: {size} bytes is too short for a GGUF file", -3)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            r = _Reader(buf, path)
            r.need(4, "the magic")
            if buf[:4] != _MAGIC:
                raise errors.CorruptModelError(f"{path}: not a GGUF file (magic {bytes(buf[:4])!r})", -3)
            r.pos = 4
            version = r.u32("the version")
            if version != 3:
                raise errors.CorruptModelError(f"{path}: GGUF version {version}; edgerun reads version 3", -3)
            r.u64("the tensor count")
            n_kv = r.u64("the key count")
            for _ in range(n_kv):
                k = r.string("a key")
                vtype = r.u32("a value type")
                if k == want:
                    if vtype != _STRING:
                        raise errors.CorruptModelError(
                            f"{path}: metadata {key!r} has value type {vtype}, not a string", -3)
                    raw = r.string(key)
                    try:
                        return raw.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise errors.CorruptModelError(f"{path}: metadata {key!r} is not UTF-8: {e}", -3) from None
                r.skip_value(vtype, k.decode("utf-8", "replace"))
    return None
