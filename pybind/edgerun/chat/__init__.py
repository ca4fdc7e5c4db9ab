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

  template.py    render(): the sandboxed jinja2 engine with transformers' settings
  gguf_meta.py   read_string(): the template (any string) from a GGUF file, in pure Python
  model_info.py  the model's template, special tokens, prompt ids and end-of-turn ids
  session.py     ChatSession (one runtime session across turns) and chat() (one reply)
  reply.py       one reply: prefill what the cache lacks, decode to the end of the turn
  sidecar.py     the conversation file saved beside a session snapshot
"""
from .gguf_meta import read_string
from .model_info import TEMPLATE_KEY, common_prefix, encode_prompt, end_of_turn_ids, model_template, special_tokens
from .session import ChatSession, chat
from .sidecar import SUFFIX as SIDECAR_SUFFIX
from .sidecar import path_of as sidecar_path
from .template import compile_template, render

__all__ = ["render", "compile_template", "chat", "ChatSession", "model_template", "special_tokens",
           "end_of_turn_ids", "encode_prompt", "common_prefix", "sidecar_path", "read_string", "TEMPLATE_KEY",
           "SIDECAR_SUFFIX"]
