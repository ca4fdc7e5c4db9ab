"""What a chat needs to know about a model: its chat template, the special
tokens the template names, how a rendered conversation becomes ids, and
which ids end a turn."""
from .. import errors
from . import gguf_meta

TEMPLATE_KEY = "tokenizer.chat_template"


def model_template(model, chat_template=None):
    """`chat_template` (Jinja text) when given, else the one the model file
    carries; ChatTemplateError saying how to pass one when it has none."""
    if chat_template is not None:
        if not isinstance(chat_template, str) or not chat_template.strip():
            raise errors.InvalidArgumentError(
                "chat_template must be the template's Jinja text (a non-empty str); to use a file, "
                "pass pathlib.Path(FILE).read_text()", -1)
        return chat_template
    text = gguf_meta.read_string(model.path, TEMPLATE_KEY)
    if not text:
        raise errors.ChatTemplateError(
            f"{model.path.name} carries no chat template (no `{TEMPLATE_KEY}` in the file); pass one: "
            "chat_template=TEXT in Python, or `edgerun chat MODEL --chat-template FILE` on the command line "
            "(the model's template is the \"chat_template\" of its tokenizer_config.json, or chat_template.jinja)")
    return text


def special_tokens(model):
    """bos_token / eos_token as the template sees them: the tokens' text
    (`model`: an edgerun.Model or its Tokenizer)."""
    tok = model if hasattr(model, "piece") else tokenizer_of(model)
    out = {}
    if tok.bos is not None:
        out["bos_token"] = tok.piece(tok.bos)
    if tok.eos is not None:
        out["eos_token"] = tok.piece(tok.eos)
    return out


def encode_prompt(tokenizer, text):
    """The ids of a rendered conversation: control tokens written in it are
    matched and nothing is added around it (the template writes BOS itself
    where the model wants one), as transformers' apply_chat_template(...,
    tokenize=True) encodes."""
    return tokenizer.encode(text, add_special=False, parse_special=True)


def end_of_turn_ids(model):
    """The ids a reply stops at: every id the vocabulary marks as ending a
    generation (EOS, EOT, EOM and control tokens such as <|im_end|>,
    <end_of_turn>, <|eot_id|>; er_vocab_is_eog)."""
    tok = tokenizer_of(model)
    return frozenset(i for i in range(tok.n_vocab) if tok.is_eog(i))


def tokenizer_of(model):
    tok = model.tokenizer
    if tok is None:
        raise errors.UnsupportedError(
            f"{model.path.name} has no tokenizer, and a chat is text; use a GGUF file with tokenizer.ggml.* "
            "metadata", -4)
    return tok


def common_prefix(a, b):
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
