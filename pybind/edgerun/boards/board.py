"""Board files (boards/<name>.yaml): loading and schema validation.

A board file says how to build for a board and how to prove the build under
emulation: the cross toolchain and explicit CPU flags (never `native`: the build
machine is not the board), the qemu-user CPU models that stand for its cores,
its ISA features, memory budget, OTA identity and latency gates. The schema is
checked field by field; every problem is a BoardError whose message names the
file and the field path, e.g.

    boards/x.yaml: qemu.cpus[1]: unknown qemu CPU model 'cortex-a99' (qemu-aarch64 has: ...)

SVE vector lengths. SVE code is vector-length agnostic, so an SVE board is tested
at several lengths: each entry of qemu.cpus is one qemu `-cpu` spec and stands for
exactly one vector length, which `vector_bits()` derives the way qemu-user does:
the length is the default length (`sve-default-vector-length=<bytes>`, 64 bytes
unless given) capped at the largest enabled one (`sve<bits>=on`; every length for
plain `max`). The schema requires an SVE board's entries to cover 128, 256 and
512 bits and the board's own `sve_bits`.
"""
import os
import pathlib
import re

from ..errors import BoardError

ARCHES = ("aarch64", "x86_64")
FEATURES = {
    "aarch64": ("neon", "fp16", "dotprod", "sve", "sve2", "i8mm", "bf16"),
    "x86_64": ("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512vl", "avx512bw", "avx512vnni"),
}
QEMU_BINARIES = {"aarch64": "qemu-aarch64"}
# The CPU models qemu-aarch64 7.2 (Debian 12) offers (`qemu-aarch64 -cpu help`)
# and the board features each can execute; a board whose features a model
# lacks would die with SIGILL under it, so the schema refuses the pair.
QEMU_CPU_FEATURES = {
    "cortex-a35": {"neon"},
    "cortex-a53": {"neon"},
    "cortex-a57": {"neon"},
    "cortex-a72": {"neon"},
    "cortex-a76": {"neon", "fp16", "dotprod"},
    "neoverse-n1": {"neon", "fp16", "dotprod"},
    "a64fx": {"neon", "fp16", "sve"},
    "max": set(FEATURES["aarch64"]),
}
# `-cpu model,prop=value` properties the driver understands.
_SVE_LEN_PROP = re.compile(r"^sve(\d+)$")
SVE_REQUIRED_BITS = (128, 256, 512)
SVE_DEFAULT_BITS = 512          # qemu-user's default vector length
TOOLCHAIN_NATIVE = "native"
_MACHINE_FLAGS = ("-mcpu=", "-march=", "-mtune=")


ACCELERATORS = ("none", "cuda")


def repo_root():
    """The checkout the driver works in: $EDGERUN_ROOT, else the one this package sits in."""
    env = os.environ.get("EDGERUN_ROOT")
    if env:
        return pathlib.Path(env).resolve()
    here = pathlib.Path(__file__).resolve().parents[3]
    if (here / "boards").is_dir():
        return here
    cwd = pathlib.Path.cwd()
    for d in (cwd, *cwd.parents):
        if (d / "boards").is_dir() and (d / "meson.build").is_file():
            return d
    raise BoardError("no edgerun checkout found (no boards/ folder); run inside the source tree "
                     "or set EDGERUN_ROOT")


def boards_dir():
    return pathlib.Path(os.environ.get("EDGERUN_BOARDS_DIR") or repo_root() / "boards")


def toolchains_dir():
    return repo_root() / "toolchains"


class Board:
    """A validated board file. `data` is the parsed YAML; the attributes are the fields
    the driver uses."""

    def __init__(self, path, data):
        self.path = pathlib.Path(path)
        self.data = data
        self.name = data["name"]
        self.description = data["description"]
        self.arch = data["arch"]
        self.cpu = data["cpu"]
        self.toolchain = data["toolchain"]
        self.cflags = list(data["cflags"])
        self.qemu_binary = data["qemu"]["binary"]
        self.qemu_cpus = list(data["qemu"]["cpus"])
        self.features = list(data["features"])
        self.sve_bits = data.get("sve_bits")
        self.cuda = data.get("cuda")
        # "cuda": `edgerun build` builds the CUDA backend (-Dcuda=enabled with the
        # toolchain's -cuda.ini); "none": the CPU path only
        self.accelerator = data.get("accelerator", "none")
        self.memory = data["memory"]
        self.ota = data["ota"]
        self.latency = data["latency"]
        self.cores = data["cores"]

    def cpus(self, cluster="big"):
        """CPU numbers of a core cluster ("big" or "little") as the board file
        lists them (cores.<cluster>.cpus), for Model(cpu_mask=...). A board
        with one cluster only numbers it 0..count-1. A big.LITTLE board without
        the list raises BoardError: guessing the numbering would pin to the
        wrong cluster, which is worse than no pinning."""
        if cluster not in ("big", "little"):
            raise BoardError(f"{self.path}: unknown core cluster '{cluster}' (expected big or little)")
        cl = self.cores.get(cluster) or {}
        if not cl.get("count"):
            raise BoardError(f"{self.path}: board '{self.name}' has no {cluster} cores")
        other = self.cores.get("little" if cluster == "big" else "big") or {}
        if cl.get("cpus") is None and not other.get("count"):
            return list(range(cl["count"]))
        if cl.get("cpus") is None:
            raise BoardError(f"{self.path}: cores.{cluster}.cpus is not listed for board '{self.name}'; "
                             f"add the CPU numbers (see /sys/devices/system/cpu/cpu*/cpu_capacity on the device)")
        return list(cl["cpus"])

    @property
    def is_native(self):
        return self.toolchain == TOOLCHAIN_NATIVE

    @property
    def has_sve(self):
        return "sve" in self.features

    def toolchain_file(self, compiler=None):
        """toolchains/<toolchain>.ini, with the compiler swapped (…-gcc -> …-clang) if asked."""
        if self.is_native:
            return None
        name = self.toolchain
        if compiler:
            name = re.sub(r"-(gcc|clang)$", f"-{compiler}", name)
        return toolchains_dir() / f"{name}.ini"

    def cuda_toolchain_file(self):
        """toolchains/<toolchain>-cuda.ini for boards with a CUDA GPU (None otherwise)."""
        return toolchains_dir() / f"{self.toolchain}-cuda.ini" if self.cuda else None

    def default_compiler(self):
        if self.is_native:
            return "gcc"
        return "clang" if self.toolchain.endswith("-clang") else "gcc"

    def vector_bits(self, cpu):
        """The SVE vector length (bits) the qemu CPU spec `cpu` runs at, None without SVE."""
        return vector_bits(cpu)

    def to_dict(self):
        d = dict(self.data)
        d["path"] = str(self.path)
        d["qemu_vector_bits"] = {c: vector_bits(c) for c in self.qemu_cpus}
        return d


def parse_cpu_spec(spec):
    """'max,sve256=on' -> ('max', {'sve256': 'on'}). Raises ValueError on a malformed spec."""
    parts = spec.split(",")
    model = parts[0].strip()
    props = {}
    for p in parts[1:]:
        if "=" not in p:
            raise ValueError(f"property '{p}' is not key=value")
        k, v = p.split("=", 1)
        props[k.strip()] = v.strip()
    return model, props


def vector_bits(spec):
    """SVE vector length of a qemu-user CPU spec (see the module docstring), or None."""
    model, props = parse_cpu_spec(spec)
    if model not in ("max", "a64fx") or props.get("sve") == "off":
        return None
    enabled = [int(m.group(1)) for k, v in props.items()
               if (m := _SVE_LEN_PROP.match(k)) and v == "on"]
    top = max(enabled) if enabled else (512 if model == "a64fx" else 2048)
    default = props.get("sve-default-vector-length")
    default_bits = SVE_DEFAULT_BITS if default in (None, "-1") else int(default) * 8
    return min(default_bits, top)


# ---- validation ----------------------------------------------------------------

class _Checker:
    def __init__(self, path):
        self.path = path

    def fail(self, field, msg):
        raise BoardError(f"{self.path}: {field}: {msg}" if field else f"{self.path}: {msg}")

    def get(self, obj, key, field, types, required=True, default=None):
        full = f"{field}.{key}" if field else key
        if key not in obj:
            if required:
                self.fail(full, "missing (required)")
            return default
        v = obj[key]
        if not _is(v, types):
            self.fail(full, f"expected {_type_name(types)}, got {_describe(v)}")
        return v

    def str_list(self, obj, key, field, required=True):
        full = f"{field}.{key}" if field else key
        v = self.get(obj, key, field, list, required, [])
        for i, x in enumerate(v):
            if not isinstance(x, str) or not x:
                self.fail(f"{full}[{i}]", f"expected a non-empty string, got {_describe(x)}")
        return v


def _is(v, types):
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(v, bool) and bool not in types:
        return False          # yaml's true/false must not pass as a number
    if v is None:
        return type(None) in types
    return isinstance(v, tuple(t for t in types if t is not type(None)))


def _type_name(types):
    types = types if isinstance(types, tuple) else (types,)
    names = {str: "a string", int: "an integer", float: "a number", list: "a list",
             dict: "a mapping", bool: "true/false", type(None): "null"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _describe(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    return f"{type(v).__name__} {v!r}"


def validate(data, path):
    """Checks parsed YAML against the schema; returns a Board or raises BoardError."""
    c = _Checker(path)
    if not isinstance(data, dict):
        c.fail("", f"expected a mapping of fields at the top level, got {_describe(data)}")
    stem = pathlib.Path(path).stem
    name = c.get(data, "name", "", str)
    if name != stem:
        c.fail("name", f"'{name}' does not match the file name '{stem}.yaml'")
    c.get(data, "description", "", str)
    c.get(data, "soc", "", str)
    arch = c.get(data, "arch", "", str)
    if arch not in ARCHES:
        c.fail("arch", f"unknown architecture '{arch}' (known: {', '.join(ARCHES)})")
    c.get(data, "cpu", "", str)

    cores = c.get(data, "cores", "", dict)
    for cluster in ("big", "little"):
        cl = c.get(cores, cluster, "cores", dict)
        f = f"cores.{cluster}"
        n = c.get(cl, "count", f, int)
        if n < 0:
            c.fail(f"{f}.count", f"must be >= 0, got {n}")
        if n > 0:
            c.get(cl, "cpu", f, str)
        mhz = c.get(cl, "max_mhz", f, int, required=False)
        if mhz is not None and mhz <= 0:
            c.fail(f"{f}.max_mhz", f"must be > 0, got {mhz}")
        cpus = c.get(cl, "cpus", f, list, required=False)
        if cpus is not None:
            for i, x in enumerate(cpus):
                if not _is(x, int) or x < 0:
                    c.fail(f"{f}.cpus[{i}]", f"expected a CPU number >= 0, got {_describe(x)}")
            if len(cpus) != n:
                c.fail(f"{f}.cpus", f"lists {len(cpus)} CPUs but count is {n}")
    for k in cores:
        if k not in ("big", "little"):
            c.fail(f"cores.{k}", "unknown cluster (expected big and little)")

    toolchain = c.get(data, "toolchain", "", str)
    if arch == "x86_64":
        if toolchain != TOOLCHAIN_NATIVE:
            c.fail("toolchain", f"an x86_64 board builds natively: expected '{TOOLCHAIN_NATIVE}', got '{toolchain}'")
    else:
        tc = toolchains_dir() / f"{toolchain}.ini"
        if toolchain == TOOLCHAIN_NATIVE or not tc.is_file():
            known = sorted(p.stem for p in toolchains_dir().glob("*.ini"))
            c.fail("toolchain", f"no toolchain file toolchains/{toolchain}.ini (known: {', '.join(known)})")

    cflags = c.str_list(data, "cflags", "")
    for i, fl in enumerate(cflags):
        if not fl.startswith("-"):
            c.fail(f"cflags[{i}]", f"'{fl}' is not a compiler flag")
        if fl.startswith(_MACHINE_FLAGS) and fl.split("=", 1)[1].split("+")[0] == "native":
            c.fail(f"cflags[{i}]", f"'{fl}': never native, the build machine is not the board; "
                                   "name the board's CPU (-mcpu=cortex-a76)")
    if not any(fl.startswith(("-mcpu=", "-march=")) for fl in cflags):
        c.fail("cflags", "needs an explicit -mcpu= or -march= for the board's CPU")

    features = c.str_list(data, "features", "")
    for i, f in enumerate(features):
        if f not in FEATURES[arch]:
            c.fail(f"features[{i}]", f"unknown {arch} feature '{f}' (known: {', '.join(FEATURES[arch])})")
    if "sve2" in features and "sve" not in features:
        c.fail("features", "sve2 needs sve in the list too")

    sve_bits = c.get(data, "sve_bits", "", int, required="sve" in features)
    if sve_bits is not None:
        if "sve" not in features:
            c.fail("sve_bits", "given, but features has no sve")
        if sve_bits < 128 or sve_bits > 2048 or sve_bits % 128:
            c.fail("sve_bits", f"must be a multiple of 128 in 128..2048, got {sve_bits}")

    qemu = c.get(data, "qemu", "", dict)
    binary = c.get(qemu, "binary", "qemu", (str, type(None)))
    cpus = c.str_list(qemu, "cpus", "qemu")
    if arch == "x86_64":
        if binary is not None or cpus:
            c.fail("qemu", "an x86_64 board runs natively: binary must be null and cpus empty")
    else:
        want = QEMU_BINARIES[arch]
        if binary != want:
            c.fail("qemu.binary", f"expected '{want}' for {arch}, got {_describe(binary)}")
        if not cpus:
            c.fail("qemu.cpus", "empty: list at least one qemu CPU model to test on")
        covered = set()
        for i, spec in enumerate(cpus):
            f = f"qemu.cpus[{i}]"
            try:
                model, props = parse_cpu_spec(spec)
            except ValueError as e:
                c.fail(f, f"malformed '{spec}': {e}")
            if model not in QEMU_CPU_FEATURES:
                c.fail(f, f"unknown qemu CPU model '{model}' ({want} has: {', '.join(QEMU_CPU_FEATURES)})")
            for k, v in props.items():
                if _SVE_LEN_PROP.match(k):
                    bits = int(_SVE_LEN_PROP.match(k).group(1))
                    if bits % 128 or not 128 <= bits <= 2048 or v not in ("on", "off"):
                        c.fail(f, f"'{k}={v}': expected sve<128..2048, multiple of 128>=on|off")
                elif k == "sve-default-vector-length":
                    if not re.fullmatch(r"-1|\d+", v) or (v != "-1" and (int(v) < 16 or int(v) % 16)):
                        c.fail(f, f"'{k}={v}': expected a length in bytes (16, 32, 64, ...) or -1")
                elif k in ("sve", "pauth", "pauth-impdef", "sme"):
                    if v not in ("on", "off"):
                        c.fail(f, f"'{k}={v}': expected on or off")
                else:
                    c.fail(f, f"unknown qemu CPU property '{k}'")
                if model != "max" and (k.startswith("sve") or k == "sme"):
                    c.fail(f, f"'{k}' needs the 'max' model")
            missing = [ft for ft in features if ft not in QEMU_CPU_FEATURES[model]]
            vl = vector_bits(spec)
            if "sve" in features and vl is None:
                missing.append("sve")
            if missing:
                c.fail(f, f"qemu model '{model}' lacks {', '.join(dict.fromkeys(missing))}, which the board's "
                          "features need (the build would die with SIGILL under it)")
            if vl is not None:
                covered.add(vl)
        if "sve" in features:
            need = sorted(set(SVE_REQUIRED_BITS) | {sve_bits})
            lacking = [b for b in need if b not in covered]
            if lacking:
                c.fail("qemu.cpus", f"an SVE board must be tested at {', '.join(map(str, need))} bits; "
                                    f"no entry runs at {', '.join(map(str, lacking))} "
                                    f"(add e.g. 'max,sve-default-vector-length={lacking[0] // 8}')")

    cuda = c.get(data, "cuda", "", dict, required=False)
    if cuda is not None:
        a = c.get(cuda, "arch", "cuda", str)
        if not re.fullmatch(r"sm_\d{2,3}", a):
            c.fail("cuda.arch", f"expected sm_<compute capability> (e.g. sm_87), got '{a}'")
        # The CUDA settings layer over the board's toolchain file (see
        # toolchains/aarch64-linux-gnu-gcc-cuda.ini) and must target this GPU.
        cf = toolchains_dir() / f"{toolchain}-cuda.ini"
        if not cf.is_file():
            c.fail("cuda", f"no CUDA toolchain file toolchains/{cf.name} for toolchain '{toolchain}'")
        if f"code={a}" not in cf.read_text():
            c.fail("cuda.arch", f"toolchains/{cf.name} does not generate code for {a}")

    acc = c.get(data, "accelerator", "", str, required=False, default="none")
    if acc not in ACCELERATORS:
        c.fail("accelerator", f"expected one of {', '.join(ACCELERATORS)}, got '{acc}'")
    elif acc == "cuda" and cuda is None:
        c.fail("accelerator", "'cuda' needs a cuda section (cuda.arch: sm_<compute capability>)")

    mem = c.get(data, "memory", "", dict)
    ram = c.get(mem, "ram_mib", "memory", int)
    budget = c.get(mem, "budget_mib", "memory", int)
    if ram < 0:
        c.fail("memory.ram_mib", f"must be >= 0 (0: whatever the machine has), got {ram}")
    if budget <= 0:
        c.fail("memory.budget_mib", f"must be > 0, got {budget}")
    if ram and budget > ram:
        c.fail("memory.budget_mib", f"{budget} MiB exceeds the board's RAM ({ram} MiB)")

    ota = c.get(data, "ota", "", dict)
    c.get(ota, "hardware", "ota", str)
    c.get(ota, "revision", "ota", str)
    slots = c.str_list(ota, "slots", "ota")
    if len(slots) != 2 or slots[0] == slots[1]:
        c.fail("ota.slots", f"expected two distinct slot names (A and B), got {slots}")

    lat = c.get(data, "latency", "", dict)
    r = c.get(lat, "p99_over_p50_max", "latency", (int, float))
    if r < 1:
        c.fail("latency.p99_over_p50_max", f"must be >= 1 (p99 is never below p50), got {r}")
    r = c.get(lat, "min_normalized_tokens_per_s_ratio", "latency", (int, float))
    if not 0 < r <= 10:
        c.fail("latency.min_normalized_tokens_per_s_ratio", f"must be in (0, 10], got {r}")

    known = {"name", "description", "soc", "arch", "cpu", "cores", "toolchain", "cflags", "qemu",
             "features", "sve_bits", "cuda", "accelerator", "memory", "ota", "latency"}
    for k in data:
        if k not in known:
            c.fail(k, f"unknown field (known: {', '.join(sorted(known))})")
    return Board(path, data)


# ---- loading -------------------------------------------------------------------

def board_names():
    return sorted(p.stem for p in boards_dir().glob("*.yaml"))


def _rel(path):
    try:
        return str(pathlib.Path(path).resolve().relative_to(repo_root()))
    except (ValueError, BoardError):
        return str(path)


def load_file(path):
    """Loads and validates one YAML file (any path)."""
    try:
        import yaml
    except ImportError:
        raise BoardError("PyYAML is not installed; pip install pyyaml (or apt-get install python3-yaml)") from None
    shown = _rel(path)
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise BoardError(f"{shown}: cannot read: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise BoardError(f"{shown}: {where}not valid YAML: {problem}") from None
    return validate(data, shown)


def load(name):
    """The board called `name` (boards/<name>.yaml); a Board passes through."""
    if isinstance(name, Board):
        return name
    path = boards_dir() / f"{name}.yaml"
    if not re.fullmatch(r"[A-Za-z0-9._-]+", str(name)) or not path.is_file():
        raise BoardError(f"unknown board '{name}'; known boards: {', '.join(board_names())}")
    return load_file(path)


def load_all():
    return [load(n) for n in board_names()]
