"""`edgerun convert HF_DIR OUT.gguf`: a Hugging Face folder to a GGUF file."""
from . import formatter, human_bytes

EPILOG = """\
examples:
  edgerun convert ./SmolLM-135M smollm-f16.gguf                # default type f16
  edgerun convert ./TinyLlama-1.1B tinyllama-q8_0.gguf --type q8_0
  edgerun convert ./Qwen2.5-0.5B qwen-q4_0.gguf --type q4_0

HF_DIR holds config.json, *.safetensors and tokenizer.json or tokenizer.model
(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM). Norms and biases stay
F32; 2-D weights take --type (a q-type tensor whose rows are not a multiple of
32 is stored as F16, with a note). torch is not needed.
"""


def register(sub):
    from ..convert import TYPES
    p = sub.add_parser("convert", help="Hugging Face folder -> GGUF", description=__doc__, epilog=EPILOG,
                       formatter_class=formatter())
    p.add_argument("hf_dir", metavar="HF_DIR", help="Hugging Face model folder")
    p.add_argument("out", metavar="OUT.gguf", help="GGUF file to write")
    p.add_argument("--type", "--outtype", dest="type", choices=TYPES, default="f16",
                   help="weight type of 2-D tensors (default: f16)")
    p.add_argument("--name", default=None, help="general.name to record (default: from config.json)")
    p.set_defaults(func=main)


def main(args):
    from ..convert import convert
    s = convert(args.hf_dir, args.out, args.type, name=args.name)
    types = ", ".join(f"{t} {n}" for t, n in sorted(s["types"].items()))
    print(f"edgerun: wrote {s['path']}: {s['arch']}, {s['n_tensors']} tensors ({types}), "
          f"{human_bytes(s['bytes'])}, type {s['type']}")
    return 0
