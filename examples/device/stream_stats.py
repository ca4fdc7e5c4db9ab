"""On-device control script: stream tokens as they are generated, then report
the runtime's statistics (TTFT, prefill and decode tokens/s, arena sections).

    python3 examples/device/stream_stats.py [MODEL.gguf] [PROMPT]
"""
import json
import sys
import time

import edgerun


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else None
    prompt = sys.argv[2] if len(sys.argv) > 2 else "4821+5179="
    with edgerun.Model(path, n_threads=1) as m:
        t0 = time.perf_counter()
        pieces = []
        for piece in m.generate(prompt, max_tokens=16, stream=True):
            pieces.append(piece)
            print(f"[{(time.perf_counter() - t0) * 1e3:7.1f} ms] {piece!r}", flush=True)
        st = m.stats()
        if st["n_generated"] != len(pieces) or st["n_generated"] < 1:
            print(f"RESULT stream_stats FAILED: {len(pieces)} pieces, stats say {st['n_generated']}")
            return 1
        report = {"model": m.path.name, "isa": m.isa, "text": "".join(pieces),
                  "n_prompt": st["n_prompt"], "n_generated": st["n_generated"], "stopped": st["stopped"],
                  "ttft_ms": round(st["ttft_ms"], 2), "decode_tokens_per_s": round(st["decode_tokens_per_s"], 1),
                  "arena_total": st["arena_total"],
                  "arena": {k: v["bytes"] for k, v in st["arena"].items() if v["bytes"]}}
        print("STATS " + json.dumps(report, sort_keys=True))
    print(f"RESULT stream_stats {st['n_generated']} tokens, stopped by {st['stopped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
