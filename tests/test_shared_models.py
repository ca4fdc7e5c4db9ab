"""Real models from ../shared/data/models (made by others' tools); skipped when absent.

babyllama-tok105: a pretrained tiny Llama, as llama.cpp's converter wrote it
(F32 and Q8_0) and as our converter writes it from its Hugging Face folder.
Greedy ids must equal greedy_reference.json (agreed by llama2.c, transformers
and a numpy reference) exactly for F32, and for the first 64 tokens in Q8_0.
llama-2-tiny-random: F16, one layer, the full Llama 2 vocabulary, from ollama's
test data: it must load, describe itself and agree with our numpy reference.
"""
import json

import numpy as np
import pytest

import edgerun
from edgerun.convert import reference
from conftest import rel_err


@pytest.fixture(scope="module")
def baby(shared_data):
    d = shared_data / "models" / "babyllama-tok105"
    if not d.is_dir():
        pytest.skip("babyllama-tok105 is not in the shared data")
    return d


@pytest.fixture(scope="module")
def greedy_ref(baby):
    return json.loads((baby / "greedy_reference.json").read_text())


@pytest.fixture(scope="module")
def ours(baby, tmp_path_factory):
    """Our own conversions of the model's hf/ folder."""
    from edgerun.convert import convert
    out = tmp_path_factory.mktemp("baby")
    return {t: convert(baby / "hf", out / f"ours-{t}.gguf", t, quiet=True)["path"] for t in ("f32", "q8_0")}


def _files(baby, ours, qtype):
    return {"llama.cpp": baby / f"babyllama-tok105-{qtype}.gguf", "edgerun": ours[qtype]}


@pytest.mark.parametrize("who", ["llama.cpp", "edgerun"])
@pytest.mark.parametrize("case", ["bos_only", "once_upon"])
def test_f32_greedy_equals_reference(baby, ours, greedy_ref, who, case):
    ref = greedy_ref[case]
    want = ref["greedy_ids_after_prompt"]
    with edgerun.Model(_files(baby, ours, "f32")[who], n_ctx=ref["n_positions"]) as m:
        got = m.generate(ref["prompt_ids"], max_tokens=len(want), stop_at_eos=False)
    assert got == want


@pytest.mark.parametrize("who", ["llama.cpp", "edgerun"])
def test_q8_0_first_64_greedy_tokens(baby, ours, greedy_ref, who):
    ref = greedy_ref["once_upon"]
    with edgerun.Model(_files(baby, ours, "q8_0")[who], n_ctx=128) as m:
        got = m.generate(ref["prompt_ids"], max_tokens=64, stop_at_eos=False)
    assert got == ref["greedy_ids_after_prompt"][:64]


def test_text_generation_reproduces_reference_story(baby, greedy_ref):
    ref = greedy_ref["once_upon"]
    with edgerun.Model(baby / "babyllama-tok105-f32.gguf", n_ctx=256) as m:
        out = m.generate(ref["prompt"], max_tokens=100)
        assert m.stats()["n_prompt"] == len(ref["prompt_ids"])
    assert ref["text"].startswith(ref["prompt"] + out)
    assert len(out) > 60   # 100 tokens of a 105-token vocabulary: mostly single characters


def test_our_conversion_matches_llama_cpp_tensor_for_tensor(baby, ours):
    """Same names, shapes and types as llama.cpp's converter; same bytes where
    both chose the same type (so Q/K permutation and Q8_0 rounding agree)."""
    from gguf import GGUFReader
    for qtype in ("f32", "q8_0"):
        theirs = {t.name: t for t in GGUFReader(str(baby / f"babyllama-tok105-{qtype}.gguf")).tensors}
        mine = {t.name: t for t in GGUFReader(str(ours[qtype])).tensors}
        assert set(mine) == set(theirs)
        same_type = 0
        for name, t in theirs.items():
            o = mine[name]
            assert list(o.shape) == list(t.shape), name
            if o.tensor_type == t.tensor_type:
                same_type += 1
                assert np.array_equal(np.asarray(o.data), np.asarray(t.data)), name
        assert same_type >= len(theirs) - 2


def test_f32_logits_match_numpy_reference(baby, greedy_ref):
    ids = greedy_ref["once_upon"]["prompt_ids"] + greedy_ref["once_upon"]["greedy_ids_after_prompt"][:40]
    path = baby / "babyllama-tok105-f32.gguf"
    with edgerun.Model(path, n_ctx=128) as m:
        got = m.logits(ids)
    assert rel_err(got, reference.forward(path, ids)) <= 1e-4


# ---------------------------------------------------------------- llama-2-tiny-random

@pytest.fixture(scope="module")
def tiny_random(shared_data):
    p = shared_data / "models" / "llama-2-tiny-random" / "llama-2-tiny-random.gguf"
    if not p.exists():
        pytest.skip("llama-2-tiny-random is not in the shared data")
    return p


def test_tiny_random_opens_and_describes_itself(tiny_random):
    with edgerun.Model(tiny_random, n_ctx=64) as m:
        hp = m.hparams
        assert hp["arch"] == "llama" and hp["n_embd"] == 8 and hp["n_layer"] == 1 and hp["n_vocab"] == 32000
        types = {t["type"] for t in m.tensors()}
        assert "F16" in types
        assert m.tokenizer is not None
        assert m.plan()["total_bytes"] > 0


def test_tiny_random_logits_finite_and_match_reference(tiny_random):
    ids = [1, 15043, 3186, 29991, 450, 4996]
    with edgerun.Model(tiny_random, n_ctx=64) as m:
        got = m.logits(ids)
        text = m.generate("Hello world", max_tokens=8)
    assert np.isfinite(got).all()
    assert rel_err(got, reference.forward(tiny_random, ids)) <= 1e-4
    assert isinstance(text, str)


def test_tiny_random_info_cli(tiny_random):
    import os
    import pathlib
    import subprocess
    import sys
    env = dict(os.environ)
    env["PYTHONPATH"] = str(pathlib.Path(__file__).resolve().parent.parent / "pybind") + os.pathsep + \
        env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "edgerun", "info", str(tiny_random), "--json"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["hparams"]["n_vocab"] == 32000 and d["tokenizer"]["n_tokens"] == 32000
