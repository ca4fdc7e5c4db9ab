"""edgerun.LiveModel: swapping the model while threads generate.

Model A is the embedded model; B is a copy with the signs of its ffn_down and
output matrices flipped (valid, other answers). Every request's output must be
exactly A's or B's reference output for its prompt, never anything else, and
the handle's counters must show every request started and ended and every
swapped-out model closed.
"""
import random
import shutil
import threading
import time

import numpy as np
import pytest

import edgerun
from edgerun import errors

PROMPTS = ["0012+0034=", "0701+0050=", "0999+0001=", "0123+0456="]
MAX_TOKENS = 6


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    gguf = pytest.importorskip("gguf")
    a = edgerun.default_model_path()
    b = tmp_path_factory.mktemp("live") / "edgerun-add-negated.gguf"
    shutil.copyfile(a, b)
    reader = gguf.GGUFReader(str(a))
    data = np.memmap(b, dtype=np.uint8, mode="r+")
    flipped = 0
    for t in reader.tensors:
        if t.tensor_type.name == "F32" and ("ffn_down" in t.name or t.name == "output.weight"):
            view = data[t.data_offset:t.data_offset + t.n_bytes].view(np.float32)
            view *= -1
            flipped += 1
    data.flush()
    del data
    assert flipped > 0
    return str(a), str(b)


@pytest.fixture(scope="module")
def refs(models):
    out = []
    for path in models:
        with edgerun.Model(path) as m:
            out.append(([m.generate(p, max_tokens=MAX_TOKENS) for p in PROMPTS], m.fingerprint))
    (ra, fa), (rb, fb) = out
    assert fa != fb
    assert any(x != y for x, y in zip(ra, rb)), "A and B answer alike: the test could not tell them apart"
    return ra, rb


def test_in_flight_request_finishes_on_old_model(models, refs):
    a, b = models
    ra, rb = refs
    with edgerun.LiveModel.open(a, n_sessions=2) as live:
        fa = live.fingerprint
        k = next(i for i in range(len(PROMPTS)) if ra[i] != rb[i])
        stream = live.generate(PROMPTS[k], max_tokens=MAX_TOKENS, stream=True, stop_at_eos=False)
        first = next(stream)
        live.swap(b)
        st = live.stats()
        assert st["generation"] == 1 and st["models_open"] == 2 and st["sessions_active"] == 1
        assert st["fingerprint"] != fa
        # a request started after the swap runs on B
        assert live.generate(PROMPTS[k], max_tokens=MAX_TOKENS) == rb[k]
        # the one in flight finishes on A's weights
        with pytest.raises(errors.BusyError):
            live.close()
        with edgerun.Model(a) as ma:
            expect = ma.generate(PROMPTS[k], max_tokens=MAX_TOKENS, stop_at_eos=False)
        assert first + "".join(stream) == expect
        st = live.stats()
        assert st["models_closed"] == 1 and st["models_open"] == 1 and st["sessions_active"] == 0


def test_swap_takes_over_a_model_object(models, refs):
    a, b = models
    ra, rb = refs
    with edgerun.LiveModel.open(a) as live:
        m = edgerun.Model(b)
        live.swap(m)
        m.close()                                   # the handle owns it now: a no-op
        assert live.generate(PROMPTS[0], max_tokens=MAX_TOKENS) == rb[0]
        with pytest.raises(errors.StateError):      # sessions only through the handle
            m.generate(PROMPTS[0], max_tokens=2)
        assert live.stats()["models_closed"] == 1     # A, idle at the swap
        live.swap(a)                                # B had no request running: closed at once
        assert live.stats()["models_closed"] == 2
        with pytest.raises(errors.StateError):
            m.generate(PROMPTS[0], max_tokens=2)
        assert live.generate(PROMPTS[0], max_tokens=MAX_TOKENS) == ra[0]
        with pytest.raises(errors.FileAccessError):
            live.swap(str(b) + ".missing")
        with pytest.raises(errors.StateError):      # the current model again
            live.swap(live.model)
        assert live.stats()["generation"] == 2
    with pytest.raises(errors.StateError):
        live.generate(PROMPTS[0])


def test_threads_generate_through_repeated_swaps(models, refs):
    a, b = models
    ra, rb = refs
    n_workers, per_worker = 4, 60
    live = edgerun.LiveModel.open(a, n_sessions=n_workers)
    stop = threading.Event()
    failures, served, swaps = [], [0, 0], [0]
    lock = threading.Lock()

    def worker(w):
        rng = random.Random(w)
        for i in range(per_worker):
            k = rng.randrange(len(PROMPTS))
            try:
                if i % 3 == 0:   # a stream, consumed slowly so swaps land inside it
                    out = ""
                    for piece in live.generate(PROMPTS[k], max_tokens=MAX_TOKENS, stream=True):
                        out += piece
                        time.sleep(0.0005)
                else:
                    out = live.generate(PROMPTS[k], max_tokens=MAX_TOKENS)
            except Exception as e:   # noqa: BLE001 - recorded and asserted below
                with lock:
                    failures.append(f"worker {w} request {i}: {e!r}")
                continue
            with lock:
                if out == ra[k] and out != rb[k]:
                    served[0] += 1
                elif out == rb[k] and out != ra[k]:
                    served[1] += 1
                elif out != ra[k]:
                    failures.append(f"prompt {PROMPTS[k]!r}: {out!r} is neither A's {ra[k]!r} nor B's {rb[k]!r}")

    def swapper():
        paths = [a, b]
        while not stop.is_set():
            nxt = paths[(swaps[0] + 1) % 2]
            live.swap(edgerun.Model(nxt, n_sessions=n_workers) if swaps[0] % 4 == 3 else nxt)
            swaps[0] += 1
            time.sleep(0.002)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(n_workers)]
    sw = threading.Thread(target=swapper)
    sw.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sw.join()
    st = live.stats()
    live.close()
    assert not failures, failures[:5]
    assert swaps[0] >= 5
    assert st["sessions_started"] == n_workers * per_worker      # none lost, none doubled
    assert st["sessions_active"] == 0
    assert st["generation"] == swaps[0]
    assert st["models_closed"] == swaps[0] and st["models_open"] == 1
    if sum(x != y for x, y in zip(ra, rb)) == len(PROMPTS):
        assert served[0] > 0 and served[1] > 0
