#!/usr/bin/env python3
"""Where `edgerun serve`'s memory goes under a stream of requests (a
diagnostic: it reports, it does not fail).

    python scripts/serve_memory.py [MODEL] [--batches 6] [--per-batch 1000] [--tracemalloc]

The server runs in this process (Server.start_in_thread, loopback, 4 slots,
1 thread); the clients run in a child process (this script with --client),
so nothing they allocate is counted here. The request mix is the soak's
(tests/test_serve_soak.py): completions and chat, plain and streamed, and a
bad request, from 4 client threads. After each batch of --per-batch requests,
once gc has run, it prints

  rss         VmRSS of this process
  py_blocks   sys.getallocatedblocks(): objects and buffers Python holds
  pym_used    pymalloc's allocated blocks (Python's small objects, in arenas
              the interpreter mmaps itself: not in malloc's counts)
  pym_free    free blocks inside pymalloc's pools in use (its fragmentation)
  pym_arenas  pymalloc's arenas (1 MiB each)
  traced      with --tracemalloc: bytes tracemalloc sees allocated by Python
  heap_used   glibc mallinfo2().uordblks: bytes malloc has handed out
  heap_free   mallinfo2().fordblks: bytes free inside malloc's arenas
  arenas      mallinfo2().arena + hblkhd: bytes malloc holds from the OS
  threads     threading.active_count()
  rss_trimmed with --trim: VmRSS after malloc_trim(0) returned malloc's free
              pages to the OS (the next sample starts from there)
  sm_heap, sm_anon, sm_file   resident kB by mapping (/proc/PID/smaps): the
              main malloc heap, other anonymous memory, files

--process serves from a process of its own running the `edgerun serve`
command, as the soak test does (uvicorn on the main thread); it samples
itself on SIGUSR1.

and with --tracemalloc, the allocation sites that grew most since the first
batch. Growth in rss with py_blocks and heap_used flat is the allocator
(free memory it keeps, in arenas or per-thread caches), not a leak.
"""
import argparse
import ctypes
import gc
import os
import pathlib
import subprocess
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "pybind"))
sys.path.insert(0, str(REPO / "scripts"))

KB_COLS = ("heap_used", "heap_free", "arenas", "traced", "pym_used", "pym_free", "pym_arenas")   # bytes, shown as kB
PLAIN_TEMPLATE = "{{ bos_token }}{{ messages[-1]['content'] }}"


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


def mallinfo():
    """glibc's mallinfo2() (all arenas), or None off glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _Mallinfo2
    m = fn()
    return {"heap_used": m.uordblks + m.hblkhd, "heap_free": m.fordblks, "arenas": m.arena + m.hblkhd}


def pymalloc():
    """pymalloc (obmalloc: Python's small objects, in 1 MiB arenas it mmaps
    itself, invisible to mallinfo): bytes in allocated blocks and in arenas,
    from sys._debugmallocstats()."""
    import tempfile
    with tempfile.TemporaryFile("w+") as f:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        out = {}
        for line in f:
            if line.startswith("# bytes in allocated blocks"):
                out["pym_used"] = int(line.split("=")[1].replace(",", ""))
            elif line.startswith("# bytes in available blocks"):
                out["pym_free"] = int(line.split("=")[1].replace(",", ""))
            elif line.startswith("# arenas allocated current"):
                out["pym_arenas"] = int(line.split("=")[1].replace(",", "")) << 20
        return out


# ------------------------------------------------------------------ client side
def client_main(base, model):
    """Reads 'N START' lines; runs requests START..START+N-1; answers 'ok FAILED'."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    import openai

    from serve_request_mix import one_request, problems
    probs = problems()
    api = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)
    http = httpx.Client(timeout=60)

    def one(i):
        return one_request(api, http, base, model, probs, i)

    with ThreadPoolExecutor(4) as pool:
        for line in sys.stdin:
            n, start = map(int, line.split())
            ok = list(pool.map(one, range(start, start + n)))
            print(f"ok {ok.count(False)}", flush=True)


# ------------------------------------------------------------------ server side
def smaps_kb(pid="self"):
    """Resident kB of a process by kind of mapping: the main malloc heap
    ([heap]), other anonymous memory (pymalloc's arenas, malloc's mmap'd
    chunks and per-thread arenas, thread stacks: 'anon'), and files
    (libraries, the mapped model: 'file')."""
    out = {"sm_heap": 0, "sm_anon": 0, "sm_file": 0}
    kind = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if not head[0].endswith(":"):          # a mapping's header line; its fields follow
                path = head[5] if len(head) > 5 else ""
                kind = "sm_heap" if path == "[heap]" else "sm_file" if path.startswith("/") else "sm_anon"
            elif head[0] == "Rss:":
                out[kind] += int(head[1])
    return out


def sample(traced, trim=False):
    gc.collect()
    row = {"rss": rss_kb(), "py_blocks": sys.getallocatedblocks(), "threads": threading.active_count(),
           **pymalloc(), **smaps_kb()}
    row.update(mallinfo() or {})
    if traced:
        import tracemalloc
        row["traced"] = tracemalloc.get_traced_memory()[0]
    if trim:
        row["rss_trimmed"] = malloc_trim()
    return row


def malloc_trim():
    """glibc's malloc_trim(0): gives the free pages inside malloc's arenas
    back to the OS. Returns VmRSS (kB) afterwards, -1 off glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return -1
    return rss_kb()


def serve_child(stats, argv):
    """`python -m edgerun ARGV` in this process, writing sample() to the file
    `stats` on each SIGUSR1 (the handler runs on the main thread, between
    two turns of uvicorn's loop)."""
    import json
    import signal

    def dump(*_):
        row = {"pid": os.getpid(), **sample(False, os.environ.get("SERVE_MEMORY_TRIM") == "1")}
        tmp = stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(row, f)
        os.replace(tmp, stats)
    signal.signal(signal.SIGUSR1, dump)
    from edgerun.cli import main as cli_main
    return cli_main(argv)


def sample_process(proc, stats):
    """The serving process's sample(): asks it with SIGUSR1, reads its file."""
    import json
    import signal
    try:
        os.unlink(stats)
    except FileNotFoundError:
        pass
    proc.send_signal(signal.SIGUSR1)
    for _ in range(300):
        if os.path.exists(stats):
            with open(stats) as f:
                row = json.load(f)
            row.pop("pid")
            return row
        time.sleep(0.05)
    raise RuntimeError("the serving process did not answer SIGUSR1")


def in_process(args, tpl):
    """(base, model id, sampler, closer) for a server in this process."""
    import edgerun
    from edgerun.serve import Server
    m = edgerun.Model(args.model, n_sessions=4, n_threads=1)
    srv = Server(m, parallel=4, chat_template=tpl)
    port = srv.start_in_thread()

    def close():
        srv.stop()
        m.close()
    return f"http://127.0.0.1:{port}", m.path.stem, lambda: sample(args.tracemalloc, args.trim), close


def out_of_process(args, tpl):
    """The same for `python -m edgerun serve` (as the soak test runs it)."""
    import socket
    import tempfile

    import httpx
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tf = tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False)
    tf.write(tpl)
    tf.close()
    stats = tf.name + ".stats.json"
    cmd = [sys.executable, __file__, "--serve-child", stats, "serve", *([args.model] if args.model else []),
           "--parallel", "4", "--threads", "1", "--chat-template", tf.name, "--port", str(port),
           "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=str(REPO / "pybind"),
                                          SERVE_MEMORY_TRIM="1" if args.trim else "0"))
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    model_id = httpx.get(f"{base}/v1/models").json()["data"][0]["id"]

    def close():
        proc.terminate()
        proc.wait(timeout=30)
        os.unlink(tf.name)
        if os.path.exists(stats):
            os.unlink(stats)
    return base, model_id, lambda: sample_process(proc, stats), close


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default=None, help="GGUF file (default: the embedded model)")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--per-batch", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--process", action="store_true",
                    help="serve from a process of its own running `edgerun serve`, as the soak test does")
    ap.add_argument("--tracemalloc", action="store_true", help="trace Python allocations (slower)")
    ap.add_argument("--trim", action="store_true",
                    help="after each sample, malloc_trim(0) and read RSS again (rss_trimmed)")
    ap.add_argument("--top", type=int, default=12, help="allocation sites to list with --tracemalloc")
    ap.add_argument("--client", metavar="BASE", help=argparse.SUPPRESS)
    ap.add_argument("--serve-child", metavar="STATS", help=argparse.SUPPRESS)
    ap.add_argument("--client-model", default="edgerun-add", help=argparse.SUPPRESS)
    if len(sys.argv) > 2 and sys.argv[1] == "--serve-child":
        return serve_child(sys.argv[2], sys.argv[3:])
    args = ap.parse_args()
    if args.client:
        return client_main(args.client, args.client_model)
    if args.tracemalloc and args.process:
        ap.error("--tracemalloc traces this process; drop --process")
    if args.tracemalloc:
        import tracemalloc
        tracemalloc.start(8)
    base, model_id, take, close = (out_of_process if args.process else in_process)(args, PLAIN_TEMPLATE)
    child = subprocess.Popen([sys.executable, __file__, "--client", base, "--client-model", model_id],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    start = 0

    def batch(n):
        nonlocal start
        child.stdin.write(f"{n} {start}\n")
        child.stdin.flush()
        line = child.stdout.readline().split()
        start += n
        if not line or line[0] != "ok":
            raise RuntimeError(f"the client process ended: {line}")
        return int(line[1])

    try:
        failed = batch(args.warmup)
        first = take()
        snap0 = tracemalloc.take_snapshot() if args.tracemalloc else None
        cols = list(first)
        print(f"serve_memory: {model_id}, 4 slots, {'a process of its own' if args.process else 'in this process'}; "
              f"after {args.warmup} warm-up requests, then per batch of {args.per_batch} (kB; py_blocks in blocks)")
        print("  requests " + " ".join(f"{c:>10}" for c in cols))

        def kb(c, v):
            return v // 1024 if c in KB_COLS else v

        def show(n, row):
            print(f"  {n:8d} " + " ".join(f"{kb(c, row[c]):>10}" for c in cols))
            print("   growth  " + " ".join(f"{kb(c, row[c] - first[c]):>+10}" for c in cols))
        show(0, first)
        for i in range(args.batches):
            t0 = time.perf_counter()
            failed += batch(args.per_batch)
            show((i + 1) * args.per_batch, take())
            print(f"           ({time.perf_counter() - t0:.1f} s, failed so far {failed})", flush=True)
        if args.tracemalloc:
            snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
            print(f"  tracemalloc: top {args.top} sites by growth since the first batch")
            for st in snap.compare_to(snap0, "traceback")[:args.top]:
                print(f"    {st.size_diff / 1024:+9.1f} kB {st.count_diff:+7d} blocks  "
                      f"{st.traceback.format()[-2:]}")
    finally:
        child.stdin.close()
        child.wait(timeout=60)
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
