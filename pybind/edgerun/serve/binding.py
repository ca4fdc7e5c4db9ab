"""The runtime binding's names that serve uses, imported in one place so a
move of the binding's modules is one edit here."""
from .. import errors
from .._ffi import check, ffi, lib
from ..chat import model_template, render, special_tokens
from ..chat.template import compile_template

ER_ECONTEXT = -7
ER_EUNSUPPORTED = -4


def sampling(temperature, top_p):
    """An er_sampling* (the C side checks the ranges again)."""
    params = ffi.new("er_sampling *")
    check(lib.er_sampling_default(params))
    params.temperature = float(temperature)
    params.top_p = float(top_p)
    return params


def can_truncate():
    """True when the library cuts a session's KV cache back to a prefix
    (er_session_truncate). Without it a slot reuses its cache only when the
    new prompt extends everything the cache holds, and starts over otherwise."""
    return hasattr(lib, "er_session_truncate")      # cffi: only names the header declares


__all__ = ["errors", "check", "ffi", "lib", "model_template", "render", "special_tokens", "compile_template",
           "sampling", "can_truncate", "ER_ECONTEXT", "ER_EUNSUPPORTED"]
