"""Helpers for tests on ../shared/data/models/families: find a family's files,
and rewrite a GGUF with keys or tensors planted, changed or dropped (read with
gguf-py's GGUFReader, written with its GGUFWriter)."""
import numpy as np

FAMILIES = ("llama3-rope-scaling", "qwen3", "smollm3", "gemma3", "phi3", "lfm2")


def family_dir(shared_data, fam):
    import pytest
    d = shared_data / "models" / "families" / fam
    if not d.is_dir():
        pytest.skip(f"models/families/{fam} is not in the shared data")
    return d


def llamacpp_file(shared_data, fam):
    return family_dir(shared_data, fam) / f"{fam}-llamacpp-f16.gguf"


_PARSED = {}


def _parsed(src):
    """(arch, [(key, type, sub_type, value)], [(name, data, shape, type)]) of
    src, read once per test session: gguf-py's reader takes seconds on a
    32,000-token vocabulary."""
    import gguf
    key = str(src)
    if key not in _PARSED:
        r = gguf.GGUFReader(key)
        kvs = []
        for name, f in r.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue
            vt = gguf.GGUFValueType(f.types[0])
            sub = gguf.GGUFValueType(f.types[-1]) if vt == gguf.GGUFValueType.ARRAY else None
            kvs.append((name, vt, sub, f.contents()))
        # raw bytes with the file's own type and shape (ne order reversed for numpy)
        ts = [(t.name, np.array(t.data), [int(x) for x in reversed(t.shape)], t.tensor_type) for t in r.tensors]
        _PARSED[key] = (r.fields["general.architecture"].contents(), kvs, ts)
    return _PARSED[key]


def rewrite(src, dst, set_keys=None, drop_keys=(), add_tensors=None, drop_tensors=(), arch=None):
    """Copies GGUF src to dst. set_keys: {key: (GGUFValueType, value)} added or
    replacing; add_tensors: {name: float32 array} (written as F32)."""
    import gguf
    a0, kvs, ts = _parsed(src)
    w = gguf.GGUFWriter(str(dst), arch or a0)
    set_keys = dict(set_keys or {})
    for name, vt, sub, val in kvs:
        if name in drop_keys or name in set_keys:
            continue
        w.add_key_value(name, val, vt, sub_type=sub)
    for name, (vt, val) in set_keys.items():
        sub = None
        if vt == gguf.GGUFValueType.ARRAY:
            sub = gguf.GGUFValueType.INT32 if isinstance(val[0], int) else gguf.GGUFValueType.FLOAT32
        w.add_key_value(name, val, vt, sub_type=sub)
    for name, data, shape, tt in ts:
        if name not in drop_tensors:
            w.add_tensor(name, data, raw_shape=shape, raw_dtype=tt)
    for name, arr in (add_tensors or {}).items():
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst
