"""On-device control script: answer addition problems with the embedded model.

Runs on the board's own Python (or under qemu-aarch64 with the sysroot from
`edgerun sysroot`), loading the cross-built libedgerun.so through the `edgerun`
package (EDGERUN_LIB points at the library). Checks every answer and exits 1
on a wrong one, so it doubles as a health check after an install.

    python3 examples/device/answer.py [MODEL.gguf]
"""
import sys

import edgerun

# (a, b) pairs covering no carry, a carry chain through every digit, and zero.
PROBLEMS = [(12, 34), (9999, 1), (365, 56), (0, 0), (4821, 5179)]


def reversed_digits(n):
    """The model writes the 5-digit sum least-significant digit first."""
    return f"{n:05d}"[::-1]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else None
    wrong = 0
    with edgerun.Model(path, n_ctx=64, n_threads=1) as m:
        print(f"model {m.path.name}: isa {m.isa}, arena {m.plan()['total_bytes']} bytes")
        for a, b in PROBLEMS:
            prompt = f"{a:04d}+{b:04d}="
            out = m.generate(prompt, max_tokens=8)
            ok = out == reversed_digits(a + b)
            wrong += not ok
            print(f"{prompt}{out}  means {int(out[::-1]) if out.isdigit() else out!r}  "
                  f"{'ok' if ok else 'WRONG, expected ' + reversed_digits(a + b)}")
        st = m.stats()
        print(f"last answer: TTFT {st['ttft_ms']:.1f} ms, decode {st['decode_tokens_per_s']:.1f} tok/s")
    print(f"RESULT answer {len(PROBLEMS) - wrong}/{len(PROBLEMS)} correct")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
