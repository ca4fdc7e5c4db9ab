"""Session snapshots through Python: edgerun.Session save/load.

- a loaded session continues token-identically to the run that was never
  interrupted (sampling with a seed and a repetition penalty, so RNG state and
  history must both come back);
- a snapshot of another model, of another KV type, a corrupt or truncated file
  and a snapshot too long for the context are refused with their typed
  errors, and the refused load leaves the session as it was;
- power cut: a process saving in a loop is SIGKILLed at 50 random moments; the
  snapshot file then always loads and holds exactly one of the two states the
  writer alternated between. (runtime_c/tests/test_snapshot.c does 200+ kills
  of the C writer; this covers the Python path.)
"""
import os
import random
import signal
import subprocess
import sys

import numpy as np
import pytest

import edgerun
from edgerun import errors

ADD = edgerun.default_model_path()
SAMPLING = dict(temperature=0.9, top_k=40, top_p=0.95, repeat_penalty=1.3, repeat_last_n=16, stop_at_eos=False)


@pytest.fixture(scope="module")
def tiny_path(tiny):
    return tiny.gguf("llama_tied", "f32")


def prompt(n=12, seed=0, n_vocab=300):
    return [int(x) for x in np.random.RandomState(seed).randint(1, n_vocab, n)]


# ---------------------------------------------------------------- resume

@pytest.mark.parametrize("kv_type", ["f32", "f16"])
def test_resume_is_token_identical_to_uninterrupted_run(tiny_path, tmp_path, kv_type):
    ids = prompt()
    with edgerun.Model(tiny_path, n_ctx=96, kv_type=kv_type) as m:
        whole = m.generate(ids, max_tokens=30, seed=11, **SAMPLING)
        with m.session() as s:
            first = s.generate(ids, max_tokens=12, seed=11, **SAMPLING)
            assert s.pos == len(ids) + 12
            s.save(tmp_path / "s.snap")
            fp = m.fingerprint
    assert first == whole[:12]
    # A new process would open the model afresh: so does this.
    with edgerun.Model(tiny_path, n_ctx=96, kv_type=kv_type) as m2, m2.session() as s2:
        assert m2.fingerprint == fp
        s2.load(tmp_path / "s.snap")
        assert s2.pos == len(ids) + 12
        rest = s2.generate(None, max_tokens=18, **SAMPLING)
    assert first + rest == whole


def test_resume_text_and_logits(tmp_path):
    with edgerun.Model(n_sessions=2) as m:
        whole = m.generate("0123+0456=", max_tokens=8)
        a, b = m.session(), m.session()
        head = a.generate("0123+0456=", max_tokens=2)
        a.save(tmp_path / "t.snap")
        b.load(tmp_path / "t.snap")
        assert b.pos == a.pos
        # the last logits travel in the snapshot: sampling needs no decode
        assert b.sample() == a.sample()
        tail = b.generate("", max_tokens=8)
        assert head + tail == whole
        # decode after a load equals decode in the saved session
        la = a.decode([5])
        b.load(tmp_path / "t.snap")
        lb = b.decode([5])
        np.testing.assert_array_equal(la, lb)
        a.close()
        b.close()


def test_decode_matches_model_logits(tiny_path):
    ids = prompt(10, seed=3)
    with edgerun.Model(tiny_path, n_ctx=64) as m:
        want = m.logits(ids)
        with m.session() as s:
            got = s.decode(ids[:6])
            np.testing.assert_allclose(got, want[5], rtol=1e-5, atol=1e-5)
            got = s.decode(ids[6:])
            np.testing.assert_allclose(got, want[-1], rtol=1e-5, atol=1e-5)
            assert s.pos == 10 and got.dtype == np.float32 and got.shape == (m.n_vocab,)
            s.reset()
            assert s.pos == 0


# ---------------------------------------------------------------- refusals

def _saved(path, tmp_path, name="x.snap", **opts):
    with edgerun.Model(path, **opts) as m, m.session() as s:
        s.generate(prompt(8, n_vocab=min(300, m.n_vocab)), max_tokens=4, stop_at_eos=False)
        s.save(tmp_path / name)
    return tmp_path / name


def test_other_model_is_refused(tiny_path, tmp_path):
    snap = _saved(tiny_path, tmp_path, n_ctx=64)
    with edgerun.Model(ADD) as m, m.session() as s:
        s.generate("0001+0002=", max_tokens=2)
        before = s.pos
        with pytest.raises(errors.MismatchError) as e:
            s.load(snap)
        assert "fingerprint" in str(e.value) or "model" in str(e.value)
        assert e.value.status_name == "ER_EMISMATCH"
        assert s.pos == before                      # untouched
        assert s.generate("", max_tokens=1)          # and still usable


def test_other_kv_type_is_refused(tiny_path, tmp_path):
    snap = _saved(tiny_path, tmp_path, n_ctx=64, kv_type="f32")
    with edgerun.Model(tiny_path, n_ctx=64, kv_type="f16") as m, m.session() as s:
        with pytest.raises(errors.MismatchError):
            s.load(snap)


def test_snapshot_longer_than_context_is_refused(tiny_path, tmp_path):
    snap = _saved(tiny_path, tmp_path, n_ctx=64)        # 12 positions
    with edgerun.Model(tiny_path, n_ctx=8) as m, m.session() as s:
        with pytest.raises(errors.ContextFullError):
            s.load(snap)


def test_corrupt_and_missing_files_are_refused(tiny_path, tmp_path):
    snap = _saved(tiny_path, tmp_path, n_ctx=64)
    data = snap.read_bytes()
    cases = {
        "payload_bit": data[:200] + bytes([data[200] ^ 1]) + data[201:],
        "header_bit": data[:20] + bytes([data[20] ^ 0x10]) + data[21:],
        "truncated": data[:len(data) // 2],
        "header_only": data[:128],
        "garbage": bytes(random.Random(0).randrange(256) for _ in range(len(data))),
        "empty": b"",
    }
    with edgerun.Model(tiny_path, n_ctx=64) as m, m.session() as s:
        s.load(snap)
        pos, want = s.pos, s.sample()
        for name, blob in cases.items():
            p = tmp_path / f"{name}.snap"
            p.write_bytes(blob)
            with pytest.raises(errors.CorruptModelError, match=r"\S"):
                s.load(p)
            assert s.pos == pos and s.sample() == want, name
        with pytest.raises(errors.FileAccessError):
            s.load(tmp_path / "no-such.snap")
        with pytest.raises(errors.FileAccessError):
            s.save(tmp_path / "no-such-dir" / "x.snap")
        assert not list(tmp_path.glob("no-such-dir*"))


# ---------------------------------------------------------------- typed errors of the API

def test_session_api_errors(tiny_path, tmp_path):
    m = edgerun.Model(tiny_path, n_ctx=16)
    s = m.session()
    with pytest.raises(errors.BusyError):
        m.session()                                  # n_sessions=1
    with pytest.raises(errors.StateError):
        s.sample()                                   # nothing decoded yet
    with pytest.raises(errors.InvalidArgumentError):
        s.generate(None)                             # empty session, no prompt
    with pytest.raises(errors.InvalidArgumentError):
        s.decode([m.n_vocab])
    with pytest.raises(errors.InvalidArgumentError):
        s.decode([])
    with pytest.raises(errors.InvalidArgumentError):
        s.seed("1")
    with pytest.raises(errors.InvalidArgumentError):
        s.sample(top_p=-1.0)
    with pytest.raises(errors.InvalidArgumentError):
        s.save(None)
    s.decode(prompt(10))
    with pytest.raises(errors.ContextFullError):
        s.decode(prompt(7))                          # 10 + 7 > 16
    with pytest.raises(errors.ContextFullError):
        s.generate(prompt(7))
    assert s.pos == 10
    s.close()
    with pytest.raises(errors.StateError):
        s.decode([1])
    s.close()                                        # twice is fine
    s2 = m.session()                                 # the slot came back
    m.close()
    for call in (lambda: s2.pos, lambda: s2.save(tmp_path / "x"), lambda: s2.decode([1])):
        with pytest.raises(errors.StateError):
            call()
    with pytest.raises(errors.StateError):
        m.fingerprint


def test_fingerprint_identifies_the_model(tiny, tiny_path):
    with edgerun.Model(tiny_path, n_ctx=32) as a, edgerun.Model(tiny_path, n_ctx=64, kv_type="f16") as b:
        fa = a.fingerprint
        assert fa == b.fingerprint and 0 < fa < 2 ** 64
    with edgerun.Model(tiny.gguf("llama_tied", "q8_0"), n_ctx=32) as c, edgerun.Model(ADD) as d:
        assert len({fa, c.fingerprint, d.fingerprint}) == 3


# ---------------------------------------------------------------- power cut

# Runs in its own process: opens the model (one thread, so fork is safe), puts
# two sessions in different states A and B, and for each round forks a writer
# that saves A, B, A, B... over one file until the test's SIGKILL lands at a
# random moment. A fork per round keeps 50 rounds to seconds; the kill hits a
# process inside Session.save's Python and C code, as a power cut would.
WRITER = r"""
import os, random, signal, sys, time
import edgerun
model, snap, rounds, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
m = edgerun.Model(model, n_ctx=64, n_sessions=2)
a, b = m.session(), m.session()
a.decode([1] + [5] * 30)
b.decode([1] + [7] * 45)
a.save(snap)
print("ready", a.pos, b.pos, flush=True)
for k in range(rounds):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, b"1")
        while True:
            a.save(snap)
            b.save(snap)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    time.sleep(rng.uniform(0.0, 0.03))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    left = os.path.exists(f"{snap}.tmp.{pid}")
    print("killed", k, int(left), flush=True)
    sys.stdin.readline()
"""


def test_power_cut_leaves_old_or_new_snapshot(tmp_path):
    rounds = 50
    snap = tmp_path / "p.snap"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(ADD), str(snap), str(rounds), "1234"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        pos_a, pos_b = int(ready[1]), int(ready[2])
        with edgerun.Model(ADD, n_ctx=64, n_sessions=3) as m:
            # the two states, rebuilt here: what a load must equal exactly
            ref = {}
            for pos, tok in ((pos_a, 5), (pos_b, 7)):
                r = m.session()
                r.decode([1] + [tok] * (pos - 1))
                ref[pos] = (r.sample(), r.decode([3]))
                r.close()
            seen, mid_write = set(), 0
            with m.session() as s:
                for k in range(rounds):
                    line = proc.stdout.readline().split()
                    assert line[:2] == ["killed", str(k)], line
                    mid_write += int(line[2])
                    s.load(snap)                        # must never be corrupt
                    assert s.pos in ref, s.pos
                    tok, logits = ref[s.pos]
                    seen.add(s.pos)
                    assert s.sample() == tok
                    np.testing.assert_array_equal(s.decode([3]), logits)
                    proc.stdin.write("\n")
                    proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the kills must have landed inside saves, or the test proved nothing
    assert mid_write >= 3, f"only {mid_write} of {rounds} kills hit a save in progress"
    assert seen == {pos_a, pos_b}
