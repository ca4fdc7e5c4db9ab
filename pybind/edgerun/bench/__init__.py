"""Benchmarks. Each one measures, compares against the reference engine in
the same run, and writes a report; none is a pass/fail test.

    engines         `edgerun bench MODEL` and `--matrix`: edgerun beside llama.cpp
    isa             `edgerun bench --qemu-isa`: Arm kernel tables under qemu-user
    board           `edgerun bench --board`: latency of a board build, with gates
    tokenizer       `edgerun bench-tokenizer`: MB/s beside HF, tiktoken, sentencepiece
    calls           `edgerun bench-tokenizer --per-call`: what one call costs, and one generated token
    cuda            `edgerun bench --device cuda`: tokens/s against GPU bandwidth
    footprint       `edgerun bench --footprint`: stripped sizes beside llama.cpp's libraries
    llama_server    llama.cpp's OpenAI server, the peer of scripts/bench_serve.py
    interference    how much of the machine other work took during a run
    trace           `edgerun trace`: record a generation's per-op events
    trace_summary   `edgerun trace --summary`: where a generation's time went
"""
from .engines import format_table, matrix, run

__all__ = ["run", "matrix", "format_table"]


def __getattr__(name):
    # The rest of what `edgerun.bench` held when it was one module (engines.py now).
    import importlib   # not `from . import`: that would ask this __getattr__ again
    engines = importlib.import_module(f"{__name__}.engines")
    if not name.startswith("_") and hasattr(engines, name):
        return getattr(engines, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
