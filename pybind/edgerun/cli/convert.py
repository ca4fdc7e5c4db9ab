"""`edgerun convert HF_DIR OUT.gguf`: a Hugging Face folder to a GGUF file."""
import pathlib

from .options import formatter, human_bytes

EPILOG = """\
examples:
  edgerun convert ./SmolLM-135M smollm-f16.gguf                # default type f16
  edgerun convert ./TinyLlama-1.1B tinyllama-q8_0.gguf --type q8_0
  edgerun convert ./Qwen2.5-0.5B qwen-q4_0.gguf --type q4_0
  edgerun convert ./TinyLlama-1.1B tinyllama-q4_k_m.gguf --type q4_k_m
  edgerun convert ./SmolLM2-135M smollm2-q3_k_m.gguf --type q3_k_m

HF_DIR holds config.json, *.safetensors and tokenizer.json or tokenizer.model
(LlamaForCausalLM with or without Llama 3.x/linear RoPE scaling, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM,
SmolLM3ForCausalLM, Lfm2ForCausalLM), written as llama.cpp's converter writes
them; settings the runtime would not compute are refused. Norms and biases stay
F32; f32/f16/bf16 store every 2-D weight in that type, q8_0 too (its output
projection included, as llama.cpp's Q8_0). torch is not needed.

The other types pick a type per tensor the way llama.cpp's quantizer does
without an importance matrix, so the file holds the tensor types
llama-quantize writes from the same model:
  q4_0 q4_1 q5_0 q5_1     32-element blocks; the output projection Q6_K
  iq4_nl iq4_xs           IQ4_NL or IQ4_XS; attn_v Q5_K with 4+ query heads per
                          KV head, ffn_down Q5_K in the first eighth of the layers
  q2_k                    Q2_K; attn_v Q3_K (Q4_K with GQA 4+), ffn_down and
                          attn_output Q3_K
  q3_k_s q3_k_m q3_k_l    Q3_K; _m and _l give attn_v, ffn_down, attn_output
                          more bits (Q4_K/Q5_K)
  q4_k_s q4_k_m           Q4_K; _s: Q5_K for the first 4 attn_v and first
                          eighth of ffn_down, _m: Q6_K for attn_v and ffn_down
                          in the first and last eighth and every third layer
  q5_k_s q5_k_m q6_k      Q5_K (_m as q4_k_m) or Q6_K everywhere
The output projection (the embedding when it doubles as output) is Q6_K in
all of them. Rows that are not a multiple of 256 cannot hold K-quant or IQ4_XS
super-blocks and take llama.cpp's 32-element fallback (Q4_K -> Q5_0, Q5_K ->
Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL), with a note; rows
not a multiple of 32 are stored as F16.
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
    folder = pathlib.Path(args.out).parent
    if not folder.is_dir():
        # convert() would make it; on the command line a missing folder is more
        # often a typo in the path, better caught than silently created.
        if folder.exists():
            raise ValueError(f"{args.out}: {folder} is not a folder; pass a path in a folder")
        raise ValueError(f"{args.out}: folder {folder} does not exist; create it first")
    s = convert(args.hf_dir, args.out, args.type, name=args.name)
    types = ", ".join(f"{t} {n}" for t, n in sorted(s["types"].items()))
    print(f"edgerun: wrote {s['path']}: {s['arch']}, {s['n_tensors']} tensors ({types}), "
          f"{human_bytes(s['bytes'])}, type {s['type']}")
    return 0
