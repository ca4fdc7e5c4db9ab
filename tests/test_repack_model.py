"""Repacked weights (runtime_c/src/repack.c) in a whole model.

On a table with an interleaved layout for Q4_0 (avx2), a Q4_0 model's plan
has a "repacked" section holding every projection matrix, and its logits
agree with the same file run in the file's layout ($EDGERUN_REPACK=0) within
float summation order (both use the same exact integer block sums); with
EDGERUN_REPACK=0, and on tables without a layout, the section is empty.
"""
import numpy as np
import pytest

from conftest import logits_repacked_and_not, rel_err


def _q4_model(tiny):
    return tiny.gguf("llama_untied_theta5e5", "q4_0")


def _matrix_bytes(path):
    from edgerun.convert import reference
    m = reference.GGUFModel(path)
    names = [n for n in m.tensor_types if n.startswith("blk.") and n.endswith(".weight")
             and m.tensor_types[n] == reference.Q4_0] + ["output.weight"]
    return sum(len(m.raw[n]) for n in names if n in m.raw)


def test_repacked_logits_match_file_layout(tiny, monkeypatch):
    path = _q4_model(tiny)
    ids = [int(v) for v in np.random.RandomState(4).randint(0, 200, 20)]
    isa, repacked, got, want = logits_repacked_and_not(path, ids, monkeypatch, n_ctx=32, n_threads=2)
    if isa == "generic":
        pytest.skip(f"table {isa} keeps the file layout for Q4_0")
    assert repacked["persistent"] == 1
    assert repacked["bytes"] >= _matrix_bytes(path) > 0
    assert repacked["used"] == repacked["bytes"]          # the plan is exact
    # same integer block sums, other float order: ~1e-7 measured
    assert rel_err(got, want) <= 1e-5


def test_generic_table_plans_no_repacked_section(tiny):
    import edgerun
    with edgerun.Model(_q4_model(tiny), n_ctx=32, isa="generic") as m:
        sec = {s["name"]: s for s in m.plan()["sections"]}["repacked"]
    assert sec["bytes"] == 0 and sec["used"] == 0


# The 32-element fallback types (kernels/x86/repack_q32_avx2.c, the Arm
# tables' kernels/neon/repack_q_neon.c, i8mm_neon.c, sve/repack_q_sve.c): the
# repacked matmul returns generic's bits, the file layout runs the table's
# row-wise dots (another float order), so the two agree as Q4_0's do.
Q32_TYPES = {"q5_0": "Q5_0", "iq4_nl": "IQ4_NL", "q4_1": "Q4_1", "q5_1": "Q5_1"}


@pytest.mark.parametrize("qtype", sorted(Q32_TYPES))
def test_repacked_q32_logits_match_file_layout(tiny, monkeypatch, qtype):
    from edgerun.convert import reference
    path = tiny.gguf("llama_untied_theta5e5", qtype)
    m = reference.GGUFModel(path)
    code = getattr(reference, Q32_TYPES[qtype])
    mats = [n for n in m.tensor_types if n.startswith("blk.") and n.endswith(".weight") and m.tensor_types[n] == code]
    assert mats, f"the {qtype} file holds no {qtype} matrix"
    ids = [int(v) for v in np.random.RandomState(5).randint(0, 200, 20)]
    isa, repacked, got, want = logits_repacked_and_not(path, ids, monkeypatch, n_ctx=32, n_threads=2)
    if isa == "generic":
        pytest.skip(f"table {isa} keeps the file layout for {qtype}")
    assert repacked["bytes"] >= sum(len(m.raw[n]) for n in mats)
    assert repacked["used"] == repacked["bytes"]          # the plan is exact
    assert rel_err(got, want) <= 1e-5
