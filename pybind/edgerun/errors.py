"""Typed exceptions for every runtime status code.

Each C failure becomes the subclass named for its status, carrying the runtime's
own message (``er_last_error``), so callers can catch the precise condition:

    try:
        edgerun.Model("broken.gguf")
    except edgerun.errors.CorruptModelError as e:
        print(e.status_name, e)
"""


class EdgerunError(Exception):
    """Base class: ``status`` is the C code, ``status_name`` its ER_* name."""

    status = None
    status_name = "ER_UNKNOWN"

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(EdgerunError, ValueError):
    status, status_name = -1, "ER_EINVAL"


class FileAccessError(EdgerunError, OSError):
    status, status_name = -2, "ER_EIO"


class CorruptModelError(EdgerunError):
    status, status_name = -3, "ER_ECORRUPT"


class UnsupportedError(EdgerunError):
    status, status_name = -4, "ER_EUNSUPPORTED"


class ArenaTooSmallError(EdgerunError, MemoryError):
    status, status_name = -5, "ER_ENOMEM_ARENA"


class OutOfMemoryError(EdgerunError, MemoryError):
    status, status_name = -6, "ER_ENOMEM"


class ContextFullError(EdgerunError):
    status, status_name = -7, "ER_ECONTEXT"


class BusyError(EdgerunError):
    status, status_name = -8, "ER_EBUSY"


class BufferTooSmallError(EdgerunError):
    status, status_name = -9, "ER_ERANGE"


class StateError(EdgerunError):
    status, status_name = -10, "ER_ESTATE"


class MismatchError(EdgerunError):
    """A valid snapshot made by another model (or with another KV cache type)."""
    status, status_name = -11, "ER_EMISMATCH"


class BoardError(EdgerunError):
    """A board file is missing or invalid, or a board build/test step failed.
    Not a C status: raised by the board driver (edgerun.boards, .build, .qemu)."""


class MissingToolError(BoardError):
    """A tool the board driver needs (cross compiler, qemu-user, sysroot, meson)
    is absent; the message names the Debian package that provides it."""


BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, FileAccessError, CorruptModelError, UnsupportedError,
    ArenaTooSmallError, OutOfMemoryError, ContextFullError, BusyError,
    BufferTooSmallError, StateError, MismatchError)}


def from_status(status, message):
    """The exception instance for a negative C status."""
    cls = BY_STATUS.get(status, EdgerunError)
    return cls(message or f"edgerun error {status}", status)


class ConfigError(EdgerunError, ValueError):
    """The device configuration (edgerun.yaml) is missing, unreadable or invalid.
    Not a C status: `field` is the dotted path of the offending setting
    ("threads.count"), or None when the file as a whole is at fault."""

    def __init__(self, message, field=None):
        super().__init__(message)
        self.field = field


class ChatTemplateError(EdgerunError, ValueError):
    """A chat template that does not parse or fails while rendering (its own
    raise_exception(...) included: the message is the template's), or a model
    that carries none. Not a C status: raised by edgerun.chat."""


class OtaError(EdgerunError):
    """An update bundle was refused (bad signature, damaged, for another board,
    older than allowed) or could not be installed; the active slot is untouched."""
