"""Chat on a model: chat templates rendered exactly as transformers renders
them, replies that stop at the end of the model's turn, and multi-turn sessions
that prefill only what is new.

    from edgerun.chat import render, ChatSession
    text = render(template, [{"role": "user", "content": "Hi"}], bos_token="<s>")

    with edgerun.Model("model.gguf") as m:
        print(m.chat([{"role": "user", "content": "Hi"}]))       # the file's template
        with m.chat_session(system="Be brief.") as c:
            c.send("Hello")
            c.send("And then?")                  # reuses the cached conversation

`edgerun chat MODEL` is the same in a terminal.
"""
from .gguf_meta import read_string
from .session import (SIDECAR_SUFFIX, TEMPLATE_KEY, ChatSession, chat, common_prefix, encode_prompt,
                      end_of_turn_ids, model_template, sidecar_path, special_tokens)
from .template import compile_template, render

__all__ = ["render", "compile_template", "chat", "ChatSession", "model_template", "special_tokens",
           "end_of_turn_ids", "encode_prompt", "common_prefix", "sidecar_path", "read_string", "TEMPLATE_KEY", "SIDECAR_SUFFIX"]
