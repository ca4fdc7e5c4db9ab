"""K-quant quantizers (Q4_K, Q5_K, Q6_K) in numpy, following llama.cpp's reference rules.

The `gguf` package dequantizes K-quants but cannot quantize them, so `edgerun
convert --type q4_k_m|q5_k_m|q6_k` and the benchmark model builder use these.
Each function takes a float32 array whose last dimension is a multiple of 256
and returns the raw block bytes (uint8, last dimension = bytes per row), laid
out exactly as llama.cpp's block_q4_K / block_q5_K / block_q6_K.

The search rules are llama.cpp's reference quantizers (no importance matrix):
  * Q4_K / Q5_K: per 32-element sub-block an asymmetric scale+min search
    (weights |x| + rms(x); grid of 21 / 16 candidate inverse scales, keep the
    weighted least-squares fit with the smallest weighted squared error), then
    the 8 scales and 8 mins quantized to 6 bits against the super-block's
    largest, stored with fp16 `d` and `dmin`.
  * Q6_K: per 16-element sub-block a symmetric search (weights x^2; the
    candidate inverse scales -(32 + 0.1*k)/max for k in [-9, 9]), then the 16
    scales quantized to int8 against the largest (by magnitude), fp16 `d`.
Everything is vectorised over all sub-blocks at once, in float32 like the C
reference, with round-half-to-even (np.rint) like its nearest_int.

`dequantize` inverts all three (used by reference.py).
"""
import numpy as np

QK_K = 256
BLOCK_BYTES = {"Q4_K": 144, "Q5_K": 176, "Q6_K": 210}
F32 = np.float32


def _f16(x):
    return np.asarray(x, dtype=F32).astype(np.float16)


def _rint(x):
    return np.rint(x).astype(np.int32)


# --------------------------------------------------------------------------- searches
def _scale_min_search(x, nmax, rmin, rdelta, nstep):
    """Asymmetric fit for each row of x (sub-blocks of 32): returns (scale, min>=0, L).

    Value ~ scale * L - min with L in [0, nmax]; `min` is returned as the
    positive offset that is subtracted (llama.cpp's the_min)."""
    x = x.astype(F32)
    n = x.shape[-1]
    av = np.sqrt((x * x).sum(-1, keepdims=True, dtype=F32) / F32(n)).astype(F32)
    w = (av + np.abs(x)).astype(F32)
    mn = np.minimum(x.min(-1), F32(0)).astype(F32)
    mx = x.max(-1).astype(F32)
    sum_w = w.sum(-1, dtype=F32)
    sum_x = (w * x).sum(-1, dtype=F32)
    flat = mx == mn
    rng = np.where(flat, F32(1), mx - mn).astype(F32)

    iscale = (F32(nmax) / rng).astype(F32)
    scale = (F32(1) / iscale).astype(F32)
    L = np.clip(_rint(iscale[:, None] * (x - mn[:, None])), 0, nmax)
    diff = scale[:, None] * L + mn[:, None] - x
    best = (w * diff * diff).sum(-1, dtype=F32)
    best_min = mn.copy()
    for step in range(nstep + 1):
        # llama.cpp lays each candidate out from the best min found so far
        # (its `min` is overwritten when a candidate wins): so do we, or the
        # codes differ from its files in most blocks, with a larger error.
        rng = np.where(flat, F32(1), mx - best_min).astype(F32)
        isc = ((F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / rng).astype(F32)
        La = np.clip(_rint(isc[:, None] * (x - best_min[:, None])), 0, nmax).astype(F32)
        sl = (w * La).sum(-1, dtype=F32)
        sl2 = (w * La * La).sum(-1, dtype=F32)
        sxl = (w * La * x).sum(-1, dtype=F32)
        D = (sum_w * sl2 - sl * sl).astype(F32)
        ok = D > 0
        Ds = np.where(ok, D, F32(1))
        this_scale = ((sum_w * sxl - sum_x * sl) / Ds).astype(F32)
        this_min = ((sl2 * sum_x - sl * sxl) / Ds).astype(F32)
        pos = this_min > 0
        this_min = np.where(pos, F32(0), this_min)
        this_scale = np.where(pos, sxl / np.where(sl2 > 0, sl2, F32(1)), this_scale).astype(F32)
        d2 = this_scale[:, None] * La + this_min[:, None] - x
        mad = (w * d2 * d2).sum(-1, dtype=F32)
        take = ok & (mad < best)
        L = np.where(take[:, None], La.astype(np.int32), L)
        best = np.where(take, mad, best)
        scale = np.where(take, this_scale, scale)
        best_min = np.where(take, this_min, best_min)
    scale = np.where(flat, F32(0), scale).astype(F32)
    L = np.where(flat[:, None], 0, L)
    return scale, (-best_min).astype(F32), L


def _symmetric_search(x, nmax):
    """Symmetric fit for each row of x (sub-blocks of 16), weights x^2: returns the scale."""
    x = x.astype(F32)
    ax = np.abs(x)
    idx = ax.argmax(-1)
    mx = np.take_along_axis(x, idx[:, None], -1)[:, 0]
    zero = ax.max(-1) < F32(1e-15)
    mxs = np.where(zero, F32(1), mx).astype(F32)
    w = (x * x).astype(F32)

    def fit(iscale):
        lv = np.clip(_rint(iscale[:, None] * x), -nmax, nmax - 1).astype(F32)
        return (w * x * lv).sum(-1, dtype=F32), (w * lv * lv).sum(-1, dtype=F32)

    sumlx, suml2 = fit((F32(-nmax) / mxs).astype(F32))
    scale = np.where(suml2 > 0, sumlx / np.where(suml2 > 0, suml2, F32(1)), F32(0)).astype(F32)
    best = (scale * sumlx).astype(F32)
    for k in range(-9, 10):
        if k == 0:
            continue
        sx, s2 = fit((-(F32(nmax) + F32(0.1) * F32(k)) / mxs).astype(F32))
        take = (s2 > 0) & (sx * sx > best * s2)
        scale = np.where(take, sx / np.where(s2 > 0, s2, F32(1)), scale).astype(F32)
        best = np.where(take, scale * sx, best).astype(F32)
    return np.where(zero, F32(0), scale).astype(F32)


# --------------------------------------------------------------------------- Q4_K / Q5_K
def _pack_scales_mins(ls, lm):
    """8 six-bit scales and mins per super-block -> the 12-byte packing (nb, 12)."""
    nb = ls.shape[0]
    out = np.zeros((nb, 12), dtype=np.uint8)
    ls = ls.astype(np.uint8)
    lm = lm.astype(np.uint8)
    out[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    out[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    return out


def _quantize_k_asym(x, nmax, rmin, rdelta, nstep):
    """Shared part of Q4_K and Q5_K: (d f16, dmin f16, packed scales, L[nb, 256])."""
    nb = x.shape[0]
    sub = x.reshape(nb * 8, 32)
    scales, mins, _ = _scale_min_search(sub, nmax, rmin, rdelta, nstep)
    scales = scales.reshape(nb, 8)
    mins = mins.reshape(nb, 8)
    max_scale = scales.max(-1)
    max_min = mins.max(-1)
    inv_s = np.where(max_scale > 0, F32(63) / np.where(max_scale > 0, max_scale, F32(1)), F32(0)).astype(F32)
    inv_m = np.where(max_min > 0, F32(63) / np.where(max_min > 0, max_min, F32(1)), F32(0)).astype(F32)
    ls = np.minimum(_rint(inv_s[:, None] * scales), 63)
    lm = np.minimum(_rint(inv_m[:, None] * mins), 63)
    d = _f16(max_scale / F32(63))
    dmin = _f16(max_min / F32(63))
    # requantize every element against the scales actually stored
    dsc = (d.astype(F32)[:, None] * ls.astype(F32)).astype(F32)
    dmn = (dmin.astype(F32)[:, None] * lm.astype(F32)).astype(F32)
    xs = x.reshape(nb, 8, 32)
    nz = dsc != 0
    q = _rint((xs + dmn[:, :, None]) / np.where(nz, dsc, F32(1))[:, :, None])
    L = np.where(nz[:, :, None], np.clip(q, 0, nmax), 0).reshape(nb, QK_K)
    return d, dmin, _pack_scales_mins(ls, lm), L


def quantize_q4_k(data):
    x, shape = _blocks(data)
    d, dmin, sc, L = _quantize_k_asym(x, 15, -1.0, 0.1, 20)
    L = L.reshape(-1, 4, 2, 32).astype(np.uint8)         # [chunk of 64][low/high half][32]
    qs = (L[:, :, 0, :] | (L[:, :, 1, :] << 4)).reshape(-1, 128)
    raw = np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), sc, qs], axis=1)
    return raw.reshape(shape[:-1] + (shape[-1] // QK_K * 144,))


def quantize_q5_k(data):
    x, shape = _blocks(data)
    d, dmin, sc, L = _quantize_k_asym(x, 31, -0.5, 0.1, 15)
    L = L.reshape(-1, 4, 2, 32).astype(np.uint8)
    hi = L >> 4
    qh = np.zeros((L.shape[0], 32), dtype=np.uint8)
    for c in range(4):   # bit 2c: fifth bit of the low half of chunk c; bit 2c+1: the high half
        qh |= hi[:, c, 0, :] << (2 * c)
        qh |= hi[:, c, 1, :] << (2 * c + 1)
    lo = L & 0xF
    qs = (lo[:, :, 0, :] | (lo[:, :, 1, :] << 4)).reshape(-1, 128)
    raw = np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), sc, qh, qs], axis=1)
    return raw.reshape(shape[:-1] + (shape[-1] // QK_K * 176,))


# --------------------------------------------------------------------------- Q6_K
def quantize_q6_k(data):
    x, shape = _blocks(data)
    nb = x.shape[0]
    scales = _symmetric_search(x.reshape(nb * 16, 16), 32).reshape(nb, 16)
    absmax_i = np.abs(scales).argmax(-1)
    max_scale = np.take_along_axis(scales, absmax_i[:, None], -1)[:, 0]
    zero = np.abs(max_scale) == 0
    iscale = np.where(zero, F32(0), F32(-128) / np.where(zero, F32(1), max_scale)).astype(F32)
    d = _f16(np.where(zero, F32(0), F32(1) / np.where(zero, F32(1), iscale)))
    isc = np.minimum(_rint(iscale[:, None] * scales), 127).astype(np.int8)
    dd = (d.astype(F32)[:, None] * isc.astype(F32)).astype(F32)
    nz = dd != 0
    q = _rint(x.reshape(nb, 16, 16) / np.where(nz, dd, F32(1))[:, :, None])
    L = (np.where(nz[:, :, None], np.clip(q, -32, 31), 0) + 32).reshape(nb, 2, 4, 32).astype(np.uint8)
    lo = L & 0xF
    hi = L >> 4
    ql = np.concatenate([lo[:, :, 0] | (lo[:, :, 2] << 4), lo[:, :, 1] | (lo[:, :, 3] << 4)], axis=2)  # (nb,2,64)
    qh = hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)                  # (nb,2,32)
    raw = np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), isc.view(np.uint8),
                          d.view(np.uint8).reshape(-1, 2)], axis=1)
    raw[zero] = 0
    return raw.reshape(shape[:-1] + (shape[-1] // QK_K * 210,))


QUANTIZERS = {"Q4_K": quantize_q4_k, "Q5_K": quantize_q5_k, "Q6_K": quantize_q6_k}


def quantize(data, type_name):
    """float array (last dim % 256 == 0) -> raw uint8 blocks of type_name."""
    return QUANTIZERS[type_name](data)


def _blocks(data):
    a = np.ascontiguousarray(data, dtype=F32)
    if a.ndim == 0 or a.shape[-1] % QK_K:
        raise ValueError(f"K-quants need rows that are a multiple of {QK_K} elements, got shape {a.shape}")
    return a.reshape(-1, QK_K), a.shape


# --------------------------------------------------------------------------- dequantize
def _scale_min_unpack(sc):
    """(nb, 12) packed bytes -> (scales (nb, 8), mins (nb, 8)) as float32."""
    sc = sc.astype(np.uint8)
    s = np.empty((sc.shape[0], 8), dtype=np.uint8)
    m = np.empty_like(s)
    s[:, :4] = sc[:, 0:4] & 63
    m[:, :4] = sc[:, 4:8] & 63
    s[:, 4:] = (sc[:, 8:12] & 0xF) | ((sc[:, 0:4] >> 6) << 4)
    m[:, 4:] = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    return s.astype(F32), m.astype(F32)


def dequantize(raw, type_name, n_elements_per_row):
    """Raw block bytes (rows, bytes) -> float32 (rows, n) following llama.cpp's layouts."""
    bb = BLOCK_BYTES[type_name]
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    rows = raw.size // (n_elements_per_row // QK_K * bb)
    b = raw.reshape(-1, bb)
    nb = b.shape[0]
    if type_name in ("Q4_K", "Q5_K"):
        d = b[:, 0:2].copy().view(np.float16).astype(F32).reshape(-1)
        dmin = b[:, 2:4].copy().view(np.float16).astype(F32).reshape(-1)
        s, m = _scale_min_unpack(b[:, 4:16])
        if type_name == "Q4_K":
            qs = b[:, 16:144].reshape(nb, 4, 32)
            q = np.stack([qs & 0xF, qs >> 4], axis=2).astype(F32)       # (nb, 4, 2, 32)
        else:
            qh = b[:, 16:48]
            qs = b[:, 48:176].reshape(nb, 4, 32)
            lo = np.stack([qs & 0xF, qs >> 4], axis=2).astype(np.uint8)
            hi = np.stack([np.stack([(qh >> (2 * c)) & 1, (qh >> (2 * c + 1)) & 1], axis=1) for c in range(4)],
                          axis=1)                                        # (nb, 4, 2, 32)
            q = (lo | (hi << 4)).astype(F32)
        q = q.reshape(nb, 8, 32)
        y = (d[:, None] * s)[:, :, None] * q - (dmin[:, None] * m)[:, :, None]
        return y.reshape(rows, n_elements_per_row).astype(F32)
    ql = b[:, 0:128].reshape(nb, 2, 64)
    qh = b[:, 128:192].reshape(nb, 2, 32)
    sc = b[:, 192:208].view(np.int8).astype(F32)
    d = b[:, 208:210].copy().view(np.float16).astype(F32).reshape(-1)
    q = np.empty((nb, 2, 4, 32), dtype=np.int32)
    q[:, :, 0] = (ql[:, :, :32] & 0xF) | (((qh >> 0) & 3) << 4)
    q[:, :, 1] = (ql[:, :, 32:] & 0xF) | (((qh >> 2) & 3) << 4)
    q[:, :, 2] = (ql[:, :, :32] >> 4) | (((qh >> 4) & 3) << 4)
    q[:, :, 3] = (ql[:, :, 32:] >> 4) | (((qh >> 6) & 3) << 4)
    q = (q - 32).reshape(nb, 16, 16).astype(F32)
    y = (d[:, None] * sc)[:, :, None] * q
    return y.reshape(rows, n_elements_per_row).astype(F32)
