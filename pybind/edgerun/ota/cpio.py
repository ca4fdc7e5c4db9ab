"""cpio "new ASCII" archives, the container of a SWUpdate bundle (.swu).

Two header magics exist: 070701 (newc) and 070702 (newc with a checksum: the
32-bit sum of the file's bytes). SWUpdate reads both and, for 070702, rejects a
file whose bytes do not add up, so we write 070702: it catches a damaged image
before the sha256 in sw-description is even compared.

Every header field is 8 hex digits. SWUpdate itself only reads the magic, the
name size, the file size and the checksum; the other fields (inode, mode,
owner, times, device numbers) and the NUL padding are not covered by anything
SWUpdate checks. So that a changed byte there is still noticed, we write those
fields with fixed values (mode 0100644, one link, everything else 0, inode =
entry number), pad with NULs, end exactly at the trailer, and `read()` here
rejects any archive that differs from that canonical form.
"""
import io
import os

MAGIC_NEWC = b"070701"
MAGIC_CRC = b"070702"
TRAILER = "TRAILER!!!"
HEADER_LEN = 110
MODE_FILE = 0o100644
# Names longer than this are refused: SWUpdate keeps file names in a fixed
# buffer of 256 bytes (with the NUL) and rejects longer ones.
MAX_NAME = 255
_CHUNK = 1 << 20


class CpioError(ValueError):
    """The archive is damaged or not in the form a bundle must have."""


def _pad4(n):
    return (-n) % 4


def checksum(data, start=0):
    """The 070702 checksum: the byte sum modulo 2**32."""
    return (start + sum(data)) & 0xFFFFFFFF


def _header(magic, ino, mode, nlink, size, namesize, chk):
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, namesize, chk)
    return magic + b"".join(b"%08X" % v for v in fields)


class Writer:
    """Appends entries to a binary stream; call close() to write the trailer.

    Files are streamed from disk twice (checksum first, then data), so a
    multi-gigabyte model never has to fit in memory.
    """

    def __init__(self, out, crc=True):
        self.out = out
        self.magic = MAGIC_CRC if crc else MAGIC_NEWC
        self.crc = crc
        self.pos = 0
        self.ino = 0
        self.names = set()

    def _write(self, b):
        self.out.write(b)
        self.pos += len(b)

    def _entry_header(self, name, size, chk, mode=MODE_FILE, nlink=1):
        raw = name.encode()
        if not raw or len(raw) > MAX_NAME or b"\0" in raw or b"/" in raw:
            raise CpioError(f"cpio entry name {name!r} must be 1..{MAX_NAME} bytes, without '/' or NUL")
        if name in self.names:
            raise CpioError(f"cpio entry {name!r} added twice")
        self.names.add(name)
        self.ino += 1
        if size > 0xFFFFFFFF:
            raise CpioError(f"{name}: {size} bytes is more than a cpio newc entry can hold (4 GiB - 1)")
        self._write(_header(self.magic, self.ino if name != TRAILER else 0, mode, nlink, size,
                            len(raw) + 1, chk if self.crc else 0))
        self._write(raw + b"\0" + b"\0" * _pad4(HEADER_LEN + len(raw) + 1))

    def add_bytes(self, name, data):
        self._entry_header(name, len(data), checksum(data))
        self._write(data)
        self._write(b"\0" * _pad4(len(data)))

    def add_file(self, name, path):
        size, chk = 0, 0
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                chk = checksum(chunk, chk)
                size += len(chunk)
        self._entry_header(name, size, chk)
        written = 0
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                self._write(chunk)
                written += len(chunk)
        if written != size:
            raise CpioError(f"{path} changed size while it was being archived")
        self._write(b"\0" * _pad4(size))

    def close(self):
        self.names.discard(TRAILER)
        self._entry_header(TRAILER, 0, 0, mode=0, nlink=1)


class Entry:
    """One member: name, size, offset of its data in the archive, checksum."""

    __slots__ = ("name", "size", "offset", "chksum", "header_offset")

    def __init__(self, name, size, offset, chksum, header_offset):
        self.name, self.size, self.offset, self.chksum, self.header_offset = \
            name, size, offset, chksum, header_offset

    def __repr__(self):
        return f"<cpio.Entry {self.name} {self.size} bytes at {self.offset}>"


def _hex(field, what, where):
    try:
        # upper case only: we write %08X, and accepting both cases would let a
        # changed byte ('a' for 'A') pass unnoticed
        if not all(c in b"0123456789ABCDEF" for c in field):
            raise ValueError
        return int(field, 16)
    except ValueError:
        raise CpioError(f"cpio header at byte {where}: {what} is not 8 upper-case hex digits") from None


def read_index(f, file_size=None):
    """Reads the headers of a seekable binary stream; returns [Entry] (without
    the trailer). Checks the canonical form (see the module docstring) and
    each 070702 checksum; raises CpioError on the first difference."""
    if file_size is None:
        f.seek(0, io.SEEK_END)
        file_size = f.tell()
    pos, entries, seen, ino = 0, [], set(), 0
    while True:
        f.seek(pos)
        hdr = f.read(HEADER_LEN)
        if len(hdr) < HEADER_LEN:
            raise CpioError(f"cpio archive ends inside a header at byte {pos} (truncated; no trailer)")
        magic = hdr[:6]
        if magic not in (MAGIC_NEWC, MAGIC_CRC):
            raise CpioError(f"cpio header at byte {pos}: bad magic {magic!r} (not a newc/crc archive)")
        v = [_hex(hdr[6 + 8 * i:14 + 8 * i], n, pos) for i, n in enumerate(
            ("c_ino", "c_mode", "c_uid", "c_gid", "c_nlink", "c_mtime", "c_filesize", "c_devmajor",
             "c_devminor", "c_rdevmajor", "c_rdevminor", "c_namesize", "c_check"))]
        c_ino, mode, uid, gid, nlink, mtime, size, dmaj, dmin, rmaj, rmin, namesize, chk = v
        if not 2 <= namesize <= MAX_NAME + 1:
            raise CpioError(f"cpio header at byte {pos}: name size {namesize} out of range")
        name_raw = f.read(namesize)
        npad = _pad4(HEADER_LEN + namesize)
        pad = f.read(npad)
        if len(name_raw) < namesize or len(pad) < npad:
            raise CpioError(f"cpio archive truncated in the name at byte {pos}")
        if name_raw[-1:] != b"\0" or b"\0" in name_raw[:-1] or pad.strip(b"\0"):
            raise CpioError(f"cpio header at byte {pos}: malformed name or padding")
        try:
            name = name_raw[:-1].decode()
        except UnicodeDecodeError:
            raise CpioError(f"cpio header at byte {pos}: name is not UTF-8") from None
        data_off = pos + HEADER_LEN + namesize + npad
        is_trailer = name == TRAILER
        want_mode, want_ino = (0, 0) if is_trailer else (MODE_FILE, ino + 1)
        if (c_ino, mode, uid, gid, nlink, mtime, dmaj, dmin, rmaj, rmin) != \
                (want_ino, want_mode, 0, 0, 1, 0, 0, 0, 0, 0) or ((magic == MAGIC_NEWC or is_trailer) and chk):
            raise CpioError(f"cpio header of {name!r} at byte {pos}: metadata fields differ from the "
                            "canonical values edgerun writes (altered archive)")
        end = data_off + size + _pad4(size)
        if end > file_size:
            raise CpioError(f"cpio entry {name!r} runs past the end of the archive (truncated)")
        if is_trailer:
            if size or end != file_size:
                raise CpioError(f"cpio archive has {file_size - end} unexpected bytes after the trailer")
            return entries
        if name in seen:
            raise CpioError(f"cpio archive holds {name!r} twice")
        seen.add(name)
        ino += 1
        if magic == MAGIC_CRC:
            got, left = 0, size
            while left:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    raise CpioError(f"cpio entry {name!r} truncated")
                got = checksum(chunk, got)
                left -= len(chunk)
            if got != chk:
                raise CpioError(f"cpio entry {name!r}: checksum {got:08x} != header {chk:08x} (damaged data)")
        f.seek(data_off + size)
        if f.read(_pad4(size)).strip(b"\0"):
            raise CpioError(f"cpio entry {name!r}: non-zero padding after its data")
        entries.append(Entry(name, size, data_off, chk, pos))
        pos = end


def copy_entry(f, entry, out, chunk=_CHUNK):
    """Streams the data of `entry` from the archive `f` into `out`; yields nothing,
    returns the number of bytes copied."""
    f.seek(entry.offset)
    left = entry.size
    while left:
        b = f.read(min(chunk, left))
        if not b:
            raise CpioError(f"cpio entry {entry.name!r} truncated")
        out.write(b)
        left -= len(b)
    return entry.size


def read_entry(f, entry):
    buf = io.BytesIO()
    copy_entry(f, entry, buf)
    return buf.getvalue()


def open_index(path):
    """(open file, [Entry]) for the archive at `path`; the caller closes the file."""
    f = open(path, "rb")
    try:
        return f, read_index(f, os.fstat(f.fileno()).st_size)
    except BaseException:
        f.close()
        raise
