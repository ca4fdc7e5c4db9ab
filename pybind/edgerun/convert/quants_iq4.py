"""IQ4_NL and IQ4_XS quantizers in numpy, following llama.cpp's search
without an importance matrix (quantize_iq4_nl / quantize_iq4_xs, both
quantize_row_iq4_nl_impl with 7 tries and weights x^2: what
llama_model_quantize runs when it is given no imatrix).

Both store 4-bit indices into one fixed table of 16 non-uniform levels
(KVALUES, llama.cpp's kvalues_iq4nl), scaled per 32-element block:

  * IQ4_NL (18 bytes per 32): fp16 d, then qs[16]: element j in the low
    nibble of byte j, element j+16 in the high nibble. Value d * KVALUES[q].
  * IQ4_XS (136 bytes per 256): fp16 d, u16 scales_h, scales_l[4], qs[128].
    Each 32-element block has a 6-bit scale ls (low nibble in scales_l, two
    high bits in scales_h); value d * (ls - 32) * KVALUES[q].

The search, per 32-element block: start from d = max/127 (max: the element
of largest magnitude, signed) and its least-squares refit, then try the 15
inverse scales (k - 127)/max for k in -7..7, each code the nearest level, and
keep the least-squares scale of the try with the largest sumqx^2/sumq2.
IQ4_NL stores that scale; IQ4_XS quantizes the 8 scales of a super-block to
6 bits against the one of largest magnitude and re-picks every code against
the scale it stores. Sums run element by element in float32 as in C.
"""
import numpy as np

KVALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int8)
_KV = KVALUES.astype(np.float32)
BLOCK_BYTES = {"IQ4_NL": 18, "IQ4_XS": 136}
F32 = np.float32
NTRY = 7


def _rint(x):
    return np.rint(x).astype(np.int32)


def _seq_sum(cols):
    s = cols[0].astype(F32, copy=True)
    for c in cols[1:]:
        s += c
    return s


def _best_index_exact(v):
    """Index of the level nearest each value of v, ties to the upper level,
    as llama.cpp's best_index_int8 (binary search, then the nearer side)."""
    mu = np.clip(np.searchsorted(_KV, v, side="right"), 1, 15)
    lo, hi = _KV[mu - 1], _KV[mu]
    return np.where(v - lo < hi - v, mu - 1, mu).astype(np.uint8)


# The midpoints between levels are all multiples of 1/2, so the answer is
# constant on each half-unit interval [k/2, (k+1)/2): one table lookup per
# value instead of a binary search (20x faster, which is what makes a 135M
# model convert in seconds). Near a midpoint both differences C compares are
# exact in float32, so the table gives its answer there too.
_HALF = np.arange(-256, 256, dtype=np.float32) / 2
_LUT_INDEX = _best_index_exact(_HALF)
_LUT_VALUE = _KV[_LUT_INDEX]


def _half_units(v):
    k = np.floor(v * F32(2))              # exact: doubling, then floor
    np.clip(k, -256, 255, out=k)
    k += 256
    return k.astype(np.intp)


def best_index(v):
    """Index of the level nearest each value of v (float32), as llama.cpp's best_index_int8."""
    return _LUT_INDEX[_half_units(v)]


def _block_scales(x):
    """Per column of x (32, N): the searched scale (0 for an all-zero block)."""
    i = np.abs(x).argmax(0)
    mx = np.take_along_axis(x, i[None, :], 0)[0]
    zero = np.abs(mx) < F32(1e-15)
    mxs = np.where(zero, F32(1), mx).astype(F32)
    w = x * x

    def fit(iscale):
        q = _LUT_VALUE[_half_units(iscale * x)]
        wq = w * q
        return _seq_sum(wq * x), _seq_sum(wq * q)

    d = (mxs / F32(127)).astype(F32)                     # -max / values[0]
    sqx, sq2 = fit((F32(1) / d).astype(F32))
    d = np.where(sq2 > 0, sqx / np.where(sq2 > 0, sq2, F32(1)), F32(0)).astype(F32)
    best = d * sqx
    for k in range(-NTRY, NTRY + 1):
        sqx, sq2 = fit((F32(k + int(KVALUES[0])) / mxs).astype(F32))
        take = (sq2 > 0) & (sqx * sqx > best * sq2)
        d = np.where(take, sqx / np.where(sq2 > 0, sq2, F32(1)), d).astype(F32)
        best = np.where(take, d * sqx, best)
    return np.where(zero, F32(0), d).astype(F32)


def _pack_nibbles(L):
    """(n, 32) codes -> (n, 16): element j low nibble, j+16 high nibble."""
    return L[:, :16] | (L[:, 16:] << 4)


def _split32(data, block):
    a = np.ascontiguousarray(data, dtype=F32)
    if a.ndim == 0 or a.shape[-1] % block:
        raise ValueError(f"this type needs rows that are a multiple of {block} elements, got shape {a.shape}")
    return a, np.ascontiguousarray(a.reshape(-1, 32).T)                 # (32, blocks)


def quantize_iq4_nl(data):
    a, xt = _split32(data, 32)
    d = _block_scales(xt)
    nz = d != 0
    inv = np.where(nz, F32(1) / np.where(nz, d, F32(1)), F32(0)).astype(F32)
    L = best_index(inv * xt).T                                            # (blocks, 32)
    raw = np.concatenate([d.astype(np.float16).view(np.uint8).reshape(-1, 2), _pack_nibbles(L)], axis=1)
    return raw.reshape(a.shape[:-1] + (a.shape[-1] // 32 * 18,))


def quantize_iq4_xs(data):
    a, xt = _split32(data, 256)
    nb = xt.shape[1] // 8
    s = _block_scales(xt).reshape(nb, 8)
    max_scale = np.take_along_axis(s, np.abs(s).argmax(-1)[:, None], -1)[:, 0]
    d = (-max_scale / F32(32)).astype(F32)
    nz = d != 0
    inv = np.where(nz, F32(1) / np.where(nz, d, F32(1)), F32(0)).astype(F32)
    ls = np.clip(_rint(inv[:, None] * s), -32, 31)                        # (nb, 8)
    # codes against the unrounded d times the stored scale, as in C
    dl = (d[:, None] * ls.astype(F32)).reshape(-1)
    idl = np.where(dl != 0, F32(1) / np.where(dl != 0, dl, F32(1)), F32(0)).astype(F32)
    L = best_index(idl * xt).T                                            # (nb*8, 32)
    ls = (ls + 32).astype(np.uint16)
    scales_l = ((ls[:, 0::2] & 0xF) | ((ls[:, 1::2] & 0xF) << 4)).astype(np.uint8)   # (nb, 4)
    scales_h = np.zeros(nb, np.uint16)
    for ib in range(8):
        scales_h |= (ls[:, ib] >> 4) << (2 * ib)
    raw = np.concatenate([d.astype(np.float16).view(np.uint8).reshape(-1, 2),
                          scales_h.astype("<u2").view(np.uint8).reshape(-1, 2), scales_l,
                          _pack_nibbles(L).reshape(nb, 128)], axis=1)
    return raw.reshape(a.shape[:-1] + (a.shape[-1] // 256 * 136,))


QUANTIZERS = {"IQ4_NL": quantize_iq4_nl, "IQ4_XS": quantize_iq4_xs}
