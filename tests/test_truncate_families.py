"""er_session_truncate on the families whose state keeps only the last
positions (../shared/data/models/families): gemma3's sliding-window rings and
lfm2's convolution ring. Cutting back within what the ring still holds gives
the logits of a fresh session prefilled with the kept tokens; cutting further
is refused (UnsupportedError) and changes nothing."""
import numpy as np
import pytest

import edgerun
from edgerun import errors
from family_files import llamacpp_file


def _ids(n, n_vocab, seed=7):
    return [int(x) for x in np.random.RandomState(seed).randint(3, min(n_vocab, 1000), n)]


def _fresh_logits(model, ids):
    with model.session() as s:
        return np.array(s.decode(ids), dtype=np.float64)


@pytest.mark.parametrize("fam", ["gemma3", "lfm2"])
def test_truncate_within_the_ring_is_exact(shared_data, fam):
    with edgerun.Model(llamacpp_file(shared_data, fam), n_ctx=128, n_batch=8, n_sessions=2) as m:
        ids = _ids(60, m.n_vocab)
        with m.session() as s:
            s.decode(ids)
            s.truncate(59)                   # one back: every ring still holds it
            got = np.array(s.decode(ids[59:] + ids[:3]), dtype=np.float64)
        want = _fresh_logits(m, ids + ids[:3])
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


@pytest.mark.parametrize("fam,back", [("gemma3", 40), ("lfm2", 5)])
def test_truncate_past_the_ring_is_refused(shared_data, fam, back):
    with edgerun.Model(llamacpp_file(shared_data, fam), n_ctx=128, n_batch=8) as m:
        ids = _ids(60, m.n_vocab)
        with m.session() as s:
            s.decode(ids)
            with pytest.raises(errors.UnsupportedError, match="reset and prefill"):
                s.truncate(60 - back)
            assert s.pos == 60
            s.truncate(0)                    # nothing before position 0 is read: always allowed
            got = np.array(s.decode(ids[:10]), dtype=np.float64)
        want = _fresh_logits(m, ids[:10])
        assert np.array_equal(got, want)


def test_truncate_on_a_full_cache_goes_anywhere(shared_data):
    with edgerun.Model(llamacpp_file(shared_data, "qwen3"), n_ctx=128) as m:
        ids = _ids(60, m.n_vocab)
        with m.session() as s:
            s.decode(ids)
            s.truncate(17)
            got = np.array(s.decode(ids[17:30]), dtype=np.float64)
        want = _fresh_logits(m, ids[:30])
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
