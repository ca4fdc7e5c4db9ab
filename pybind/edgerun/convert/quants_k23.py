"""Q2_K and Q3_K quantizers in numpy, following llama.cpp's reference rules
(quantize_row_q2_K_ref / quantize_row_q3_K_ref: what llama_model_quantize
runs without an importance matrix).

Both types cut a 256-element super-block into 16 sub-blocks of 16:

  * Q2_K (84 bytes: scales[16], qs[64], fp16 d, fp16 dmin): value =
    d*sc*q - dmin*m with q in 0..3 and 4-bit sc, m per sub-block. Each
    sub-block gets an asymmetric scale+min search weighted by |x| that
    minimises the weighted *absolute* error (16 candidate inverse scales,
    (nmax - 0.5 + 0.1*k)/range); scales and mins are then quantized to 4 bits
    against the super-block's largest and every element requantized against
    what is stored. A sub-block whose stored scale is 0 keeps the codes of
    its search (they decode to -dmin*m whatever they are).
  * Q3_K (110 bytes: hmask[32], qs[64], scales[12], fp16 d): value =
    d*sc*(q-4), q in 0..7 (two low bits in qs, the third in hmask), 6-bit
    signed sc. Each sub-block gets a symmetric fit weighted by x^2 refined by
    up to five passes of coordinate descent (one code at a time moves to the
    value its least-squares scale implies when that raises sumlx^2/suml2).

Everything is vectorised over all sub-blocks of a tensor at once. Sums run
element by element in float32 like the C loops (not numpy's pairwise sums),
so that ties between candidate scales break the same way as far as float32
allows: the codes usually equal llama.cpp's bit for bit, and where its
compiler fused a multiply-add and ours did not, the quantization error stays
the same (tests/test_convert_quant_types.py compares both with llama.cpp).
"""
import numpy as np

QK_K = 256
BLOCK_BYTES = {"Q2_K": 84, "Q3_K": 110}
F32 = np.float32


def _rint(x):
    return np.rint(x).astype(np.int32)


def _f16(x):
    return np.asarray(x, dtype=F32).astype(np.float16)


def _blocks(data):
    a = np.ascontiguousarray(data, dtype=F32)
    if a.ndim == 0 or a.shape[-1] % QK_K:
        raise ValueError(f"K-quants need rows that are a multiple of {QK_K} elements, got shape {a.shape}")
    return a.reshape(-1, QK_K), a.shape


def _seq_sum(cols):
    """Sum over the first axis one term at a time, as a C loop does."""
    s = cols[0].astype(F32, copy=True)
    for c in cols[1:]:
        s += c
    return s


def _signed_absmax(x):
    """Per column of x (n, N): the first element of largest magnitude."""
    i = np.abs(x).argmax(0)
    return np.take_along_axis(x, i[None, :], 0)[0]


# --------------------------------------------------------------------------- Q2_K
def _qkx2_mad(x, nmax, rmin, rdelta, nstep):
    """Asymmetric search for each column of x (16, N), weights |x|, absolute
    error: returns (scale, the_min >= 0, L (16, N) int32)."""
    w = np.abs(x)
    mn = np.minimum(x.min(0), F32(0))
    mx = x.max(0)
    sum_w = _seq_sum(w)
    sum_x = _seq_sum(w * x)
    flat = mx == mn
    rng = np.where(flat, F32(1), mx - mn).astype(F32)
    iscale = (F32(nmax) / rng).astype(F32)
    scale = (F32(1) / iscale).astype(F32)
    L = np.clip(_rint(iscale * (x - mn)), 0, nmax)
    best = _seq_sum(w * np.abs(scale * L + mn - x))
    # As in C, a better candidate replaces `min`, and the later candidates
    # are laid out from it (their range is max - min with the new min).
    for step in range(nstep + 1):
        rng = np.where(flat, F32(1), mx - mn).astype(F32)
        isc = ((F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / rng).astype(F32)
        La = np.clip(_rint(isc * (x - mn)), 0, nmax)
        Lf = La.astype(F32)
        sl = _seq_sum(w * Lf)
        sl2 = _seq_sum(w * Lf * Lf)
        sxl = _seq_sum(w * Lf * x)
        D = sum_w * sl2 - sl * sl
        ok = D > 0
        Ds = np.where(ok, D, F32(1))
        this_scale = (sum_w * sxl - sum_x * sl) / Ds
        this_min = (sl2 * sum_x - sl * sxl) / Ds
        pos = this_min > 0
        this_min = np.where(pos, F32(0), this_min)
        this_scale = np.where(pos, sxl / np.where(sl2 > 0, sl2, F32(1)), this_scale).astype(F32)
        err = _seq_sum(w * np.abs(this_scale * Lf + this_min - x))
        take = ok & (err < best)
        L = np.where(take, La, L)
        best = np.where(take, err, best)
        scale = np.where(take, this_scale, scale)
        mn = np.where(take, this_min, mn)
    scale = np.where(flat, F32(0), scale).astype(F32)
    L = np.where(flat, 0, L)
    return scale, (-mn).astype(F32), L


def _pack_2bit(L):
    """(nb, 256) codes 0..3 -> (nb, 64): byte 32*h + l holds elements
    128*h + l, +32, +64, +96 in bit pairs 0, 2, 4, 6."""
    q = L.reshape(-1, 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def quantize_q2_k(data):
    x, shape = _blocks(data)
    nb = x.shape[0]
    xt = np.ascontiguousarray(x.reshape(nb * 16, 16).T)                  # (16, sub-blocks)
    scales, mins, L = _qkx2_mad(xt, 3, -0.5, 0.1, 15)
    scales = scales.reshape(nb, 16)
    mins = mins.reshape(nb, 16)
    L = L.T.reshape(nb, 16, 16)
    max_scale = np.maximum(scales.max(-1), F32(0))
    max_min = np.maximum(mins.max(-1), F32(0))
    has_s, has_m = max_scale > 0, max_min > 0
    inv_s = np.where(has_s, F32(15) / np.where(has_s, max_scale, F32(1)), F32(0)).astype(F32)
    inv_m = np.where(has_m, F32(15) / np.where(has_m, max_min, F32(1)), F32(0)).astype(F32)
    ls = np.where(has_s[:, None], _rint(inv_s[:, None] * scales), 0)
    lm = np.where(has_m[:, None], _rint(inv_m[:, None] * mins), 0)
    sc = ((ls & 0xFF) | ((lm << 4) & 0xFF)).astype(np.uint8)             # C stores int into uint8
    d = _f16(np.where(has_s, max_scale / F32(15), F32(0)))
    dmin = _f16(np.where(has_m, max_min / F32(15), F32(0)))
    dj = d.astype(F32)[:, None] * (sc & 0xF).astype(F32)
    dm = dmin.astype(F32)[:, None] * (sc >> 4).astype(F32)
    nz = dj != 0
    q = np.clip(_rint((x.reshape(nb, 16, 16) + dm[:, :, None]) / np.where(nz, dj, F32(1))[:, :, None]), 0, 3)
    L = np.where(nz[:, :, None], q, L).reshape(nb, QK_K)
    raw = np.concatenate([sc, _pack_2bit(L), d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2)],
                         axis=1)
    return raw.reshape(shape[:-1] + (shape[-1] // QK_K * 84,))


# --------------------------------------------------------------------------- Q3_K
def _q3_fit(x, nmax):
    """Symmetric fit with coordinate descent for each column of x (16, N):
    returns (scale, L (16, N) in 0..2*nmax-1)."""
    n = x.shape[0]
    mx = _signed_absmax(x)
    zero = np.abs(mx) < F32(1e-15)
    iscale = (F32(-nmax) / np.where(zero, F32(1), mx)).astype(F32)
    L = np.clip(_rint(iscale * x), -nmax, nmax - 1)
    w = x * x
    wx = w * x
    sumlx = _seq_sum(wx * L.astype(F32))
    suml2 = _seq_sum(w * L.astype(F32) * L.astype(F32))
    for _ in range(5):
        # once a pass changes nothing in a column, the next ones change nothing
        # either: the C loop's early exit needs no mask
        for i in range(n):
            li = L[i].astype(F32)
            slx = sumlx - wx[i] * li
            sl2 = suml2 - w[i] * li * li
            cand = slx > 0
            new_l = np.clip(_rint(x[i] * sl2 / np.where(cand, slx, F32(1))), -nmax, nmax - 1)
            nl = new_l.astype(F32)
            slx2 = slx + wx[i] * nl
            sl22 = sl2 + w[i] * nl * nl
            take = cand & (new_l != L[i]) & (sl22 > 0) & (slx2 * slx2 * suml2 > sumlx * sumlx * sl22)
            L[i] = np.where(take, new_l, L[i])
            sumlx = np.where(take, slx2, sumlx)
            suml2 = np.where(take, sl22, suml2)
    scale = np.where(suml2 > 0, sumlx / np.where(suml2 > 0, suml2, F32(1)), F32(0)).astype(F32)
    # an all-zero sub-block returns codes 0 (not nmax) and scale 0, as in C
    return np.where(zero, F32(0), scale), np.where(zero, 0, L + nmax)


def quantize_q3_k(data):
    x, shape = _blocks(data)
    nb = x.shape[0]
    xt = np.ascontiguousarray(x.reshape(nb * 16, 16).T)
    scales, L = _q3_fit(xt, 4)
    scales = scales.reshape(nb, 16)
    L = L.T.reshape(nb, 16, 16)
    max_scale = np.take_along_axis(scales, np.abs(scales).argmax(-1)[:, None], -1)[:, 0]
    has = max_scale != 0
    iscale = np.where(has, F32(-32) / np.where(has, max_scale, F32(1)), F32(0)).astype(F32)
    ls = np.where(has[:, None], np.clip(_rint(iscale[:, None] * scales), -32, 31), 0) + 32   # 0..63
    d = _f16(np.where(has, F32(1) / np.where(has, iscale, F32(1)), F32(0)))
    dj = d.astype(F32)[:, None] * (ls - 32).astype(F32)
    nz = dj != 0
    q = np.clip(_rint(x.reshape(nb, 16, 16) / np.where(nz, dj, F32(1))[:, :, None]), -4, 3) + 4
    L = np.where(nz[:, :, None], q, L).reshape(nb, QK_K)
    # the third bit of element j goes to bit j // 32 of hmask byte j % 32
    hi = (L > 3).reshape(nb, 8, 32).astype(np.uint8)
    hmask = np.zeros((nb, 32), np.uint8)
    for b in range(8):
        hmask |= hi[:, b] << b
    L = np.where(L > 3, L - 4, L)
    ls = ls.astype(np.uint8)
    sc = np.zeros((nb, 12), np.uint8)
    sc[:, 0:8] = (ls[:, 0:8] & 0xF) | ((ls[:, 8:16] & 0xF) << 4)
    hi2 = ls >> 4                                                        # (nb, 16), 0..3
    for j in range(16):
        sc[:, 8 + j % 4] |= hi2[:, j] << (2 * (j // 4))
    raw = np.concatenate([hmask, _pack_2bit(L), sc, d.view(np.uint8).reshape(-1, 2)], axis=1)
    return raw.reshape(shape[:-1] + (shape[-1] // QK_K * 110,))


QUANTIZERS = {"Q2_K": quantize_q2_k, "Q3_K": quantize_q3_k}
