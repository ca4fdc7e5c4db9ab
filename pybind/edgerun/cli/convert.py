"""`edgerun convert HF_DIR OUT.gguf`: a Hugging Face folder to a GGUF file."""
from .options import formatter, human_bytes

EPILOG = """\
examples:
  edgerun convert ./SmolLM-135M smollm-f16.gguf                # default type f16
  edgerun convert ./TinyLlama-1.1B tinyllama-q8_0.gguf --type q8_0
  edgerun convert ./Qwen2.5-0.5B qwen-q4_0.gguf --type q4_0
  edgerun convert ./TinyLlama-1.1B tinyllama-q4_k_m.gguf --type q4_k_m

HF_DIR holds config.json, *.safetensors and tokenizer.json or tokenizer.model
(LlamaForCausalLM with or without Llama 3.x/linear RoPE scaling, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM,
SmolLM3ForCausalLM, Lfm2ForCausalLM), written as llama.cpp's converter writes
them; settings the runtime would not compute are refused. Norms and biases stay
F32; 2-D weights take --type (a q-type tensor whose rows are not a multiple of
32 is stored as F16, with a note). torch is not needed.

K-quant mixes pick a type per tensor the way llama.cpp does without an
importance matrix: q4_k_m and q5_k_m store most weights as Q4_K / Q5_K, and
attn_v and ffn_down as Q6_K in the first and last eighth of the layers and in
every third layer between; q6_k stores everything as Q6_K; the output
projection is Q6_K in all three. Rows that are not a multiple of 256 cannot
hold K-quant super-blocks and are stored as Q8_0, with a note.
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
