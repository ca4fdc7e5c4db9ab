"""The device configuration, edgerun.yaml: one file per slot that says which model
runs and how, where the slots live, and what the health check expects.

    version: 1
    model:
      path: models/edgerun-add.gguf   # relative to the folder of this file (the slot)
      n_ctx: 64                       # 0: the model's own context, at most 2048
      kv_type: f32                    # f32 | f16
    kv_cache:
      strategy: fail                  # fail | sliding_window: what a full context does
      keep: 0                         # sliding_window: tokens always kept at the start
    threads:
      count: 2                        # worker threads
      pin: [0, 1]                     # CPU ids the process is pinned to; [] = no pinning
    sampling:                         # defaults for generate(); greedy unless temperature > 0
      temperature: 0.0
      top_k: 0
      top_p: 1.0
      min_p: 0.0
      repeat_penalty: 1.0
      repeat_last_n: 0
      seed: null
      max_tokens: 64
    arena:
      budget_mib: 64                  # opening fails when the arena plan needs more
    slots:
      root: /opt/edgerun              # device folder that holds the slots
      names: [rootfs-a, rootfs-b]     # slot A and slot B, folders under root
      link: current                   # symlink under root -> the active slot
    health_check:
      prompt: "0012+0034="
      expect: "64000"                 # exact generated text (greedy)
      max_tokens: 6
      timeout_s: 120
    hawkbit:                          # optional: SWUpdate's suricatta polls this hawkBit server
      url: https://hawkbit.example:8443
      tenant: DEFAULT
      device_id: null                 # null: each device passes its own (swupdate -u "-i ID")
      poll_s: 300                     # polldelay
      retry: 5                        # resumed download attempts
      retry_wait_s: 5
      check_cert: true                # false: nocheckcert (test servers only)

Every problem raises ConfigError naming the file and the dotted field, e.g.
`edgerun.yaml: threads.pin[1]: CPU 9 is not online (online: 0-3)`. The bundle
carries the file (edgerun package), the health check and `edgerun run --config`
read it, and on the device `open_model(load(path))` opens the model it names.
"""
import copy
import os
import pathlib
import re

from ..errors import ConfigError

FILE_NAME = "edgerun.yaml"
SCHEMA_VERSION = 1
# kv_cache.strategy -> Model(ctx_strategy=...): a full session fails
# (ContextFullError) or slides (edgerun.h, ER_CTX_SLIDE)
KV_STRATEGIES = {"fail": "fail", "sliding_window": "slide"}
_SLOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")

DEFAULTS = {
    "version": SCHEMA_VERSION,
    "model": {"path": None, "n_ctx": 0, "kv_type": "f32"},
    "kv_cache": {"strategy": "fail", "keep": 0},
    "threads": {"count": 1, "pin": []},
    "sampling": {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0,
                 "repeat_last_n": 0, "seed": None, "max_tokens": 64},
    "arena": {"budget_mib": 256},
    "slots": {"root": "/opt/edgerun", "names": ["rootfs-a", "rootfs-b"], "link": "current"},
    "health_check": {"prompt": None, "expect": None, "max_tokens": 16, "timeout_s": 120},
}
# Optional sections: absent unless the file has them.
OPTIONAL = {
    "hawkbit": {"url": None, "tenant": "DEFAULT", "device_id": None, "poll_s": 300, "retry": 5,
                "retry_wait_s": 5, "check_cert": True},
}
_HAWKBIT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}\Z")
_HAWKBIT_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?\Z")


class DeviceConfig:
    """A validated configuration. `data` is the full dict (defaults filled in);
    `path` the file it came from (None when built in memory); `base` the folder
    relative paths are taken from."""

    def __init__(self, data, path=None, base=None):
        self.data = data
        self.path = pathlib.Path(path) if path else None
        self.base = pathlib.Path(base) if base else (self.path.parent if self.path else pathlib.Path.cwd())

    def __getitem__(self, section):
        return self.data[section]

    def model_path(self, base=None):
        p = pathlib.Path(self.data["model"]["path"])
        return p if p.is_absolute() else pathlib.Path(base or self.base) / p

    def model_kwargs(self):
        """Keyword arguments for edgerun.Model (besides the path)."""
        m, t = self.data["model"], self.data["threads"]
        kv = self.data["kv_cache"]
        return {"n_ctx": m["n_ctx"], "n_threads": t["count"], "kv_type": m["kv_type"],
                "ctx_strategy": KV_STRATEGIES[kv["strategy"]], "ctx_keep": kv["keep"]}

    def sampling_kwargs(self):
        """Keyword arguments for Model.generate() (max_tokens included)."""
        return dict(self.data["sampling"])

    def to_yaml(self):
        return dump(self.data)


# ------------------------------------------------------------------ validation

class _Check:
    def __init__(self, source):
        self.source = source

    def fail(self, field, msg):
        raise ConfigError(f"{self.source}: {field}: {msg}", field)

    def section(self, data, name):
        v = data.get(name)
        if v is None:
            return {}
        if not isinstance(v, dict):
            self.fail(name, f"expected a mapping, got {_show(v)}")
        return v

    def known(self, data, allowed, prefix):
        for k in data:
            if k not in allowed:
                where = f"{prefix}.{k}" if prefix else str(k)
                self.fail(where, f"unknown setting (known: {', '.join(sorted(allowed))})")

    def integer(self, field, v, lo, hi=None):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
            rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            self.fail(field, f"expected an integer {rng}, got {_show(v)}")
        return v

    def number(self, field, v, lo, hi):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
            self.fail(field, f"expected a number in [{lo}, {hi}], got {_show(v)}")
        return float(v)

    def string(self, field, v, allow_empty=False):
        if not isinstance(v, str) or (not allow_empty and not v):
            self.fail(field, f"expected a {'' if allow_empty else 'non-empty '}string, got {_show(v)}")
        return v


def _show(v):
    if v is None:
        return "nothing (null)"
    return f"{type(v).__name__} {v!r}"


def _online_cpus():
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def validate(raw, source=FILE_NAME, check_cpus=False):
    """A DeviceConfig from parsed YAML, defaults filled in. check_cpus: also
    check that threads.pin names CPUs this machine has (on the device itself)."""
    c = _Check(source)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of settings at the top level, got {_show(raw)}")
    c.known(raw, list(DEFAULTS) + list(OPTIONAL), "")
    data = copy.deepcopy(DEFAULTS)
    for sec in DEFAULTS:
        if sec == "version":
            continue
        given = c.section(raw, sec)
        c.known(given, DEFAULTS[sec].keys(), sec)
        data[sec].update(given)
    data["version"] = raw.get("version", SCHEMA_VERSION)
    if data["version"] != SCHEMA_VERSION:
        c.fail("version", f"this edgerun reads version {SCHEMA_VERSION}, got {_show(data['version'])}")

    m = data["model"]
    c.string("model.path", m["path"])
    c.integer("model.n_ctx", m["n_ctx"], 0, 1 << 20)
    if m["kv_type"] not in ("f32", "f16"):
        c.fail("model.kv_type", f"expected 'f32' or 'f16', got {_show(m['kv_type'])}")

    kv = data["kv_cache"]
    if kv["strategy"] not in KV_STRATEGIES:
        c.fail("kv_cache.strategy", f"expected one of {', '.join(KV_STRATEGIES)}, got {_show(kv['strategy'])}")
    c.integer("kv_cache.keep", kv["keep"], 0, 1 << 20)
    if kv["strategy"] == "sliding_window" and m["n_ctx"] and kv["keep"] > m["n_ctx"] - 2:
        c.fail("kv_cache.keep", f"a slide must forget at least one token: keep {kv['keep']} with model.n_ctx "
                                f"{m['n_ctx']} allows at most {m['n_ctx'] - 2}")

    t = data["threads"]
    c.integer("threads.count", t["count"], 1, 1024)
    if not isinstance(t["pin"], list):
        c.fail("threads.pin", f"expected a list of CPU ids, got {_show(t['pin'])}")
    online = _online_cpus() if check_cpus else None
    for i, cpu in enumerate(t["pin"]):
        c.integer(f"threads.pin[{i}]", cpu, 0, 4095)
        if online is not None and cpu not in online:
            c.fail(f"threads.pin[{i}]", f"CPU {cpu} is not available here (available: {online})")
    if len(set(t["pin"])) != len(t["pin"]):
        c.fail("threads.pin", f"lists a CPU twice: {t['pin']}")

    s = data["sampling"]
    c.number("sampling.temperature", s["temperature"], 0.0, 100.0)
    c.integer("sampling.top_k", s["top_k"], 0)
    c.number("sampling.top_p", s["top_p"], 0.0, 1.0)
    c.number("sampling.min_p", s["min_p"], 0.0, 1.0)
    c.number("sampling.repeat_penalty", s["repeat_penalty"], 0.0, 100.0)
    c.integer("sampling.repeat_last_n", s["repeat_last_n"], 0)
    if s["seed"] is not None:
        c.integer("sampling.seed", s["seed"], 0, 2**64 - 1)
    c.integer("sampling.max_tokens", s["max_tokens"], 1)

    c.number("arena.budget_mib", data["arena"]["budget_mib"], 0.001, 1 << 30)

    sl = data["slots"]
    root = c.string("slots.root", sl["root"])
    if not root.startswith("/"):
        c.fail("slots.root", f"expected an absolute path on the device, got {root!r}")
    if not isinstance(sl["names"], list) or len(sl["names"]) != 2:
        c.fail("slots.names", f"expected two slot names [A, B], got {_show(sl['names'])}")
    for i, n in enumerate(sl["names"]):
        if not isinstance(n, str) or not _SLOT_NAME.match(n):
            c.fail(f"slots.names[{i}]", f"expected a plain folder name (letters, digits, . _ -), got {_show(n)}")
    if sl["names"][0] == sl["names"][1]:
        c.fail("slots.names", f"slot A and slot B must differ, both are {sl['names'][0]!r}")
    link = c.string("slots.link", sl["link"])
    if not _SLOT_NAME.match(link) or link in sl["names"]:
        c.fail("slots.link", f"expected a plain name other than the slot names, got {link!r}")

    h = data["health_check"]
    c.string("health_check.prompt", h["prompt"])
    c.string("health_check.expect", h["expect"])
    c.integer("health_check.max_tokens", h["max_tokens"], 1, 4096)
    c.number("health_check.timeout_s", h["timeout_s"], 1, 24 * 3600)

    if raw.get("hawkbit") is not None:
        given = c.section(raw, "hawkbit")
        c.known(given, OPTIONAL["hawkbit"].keys(), "hawkbit")
        hb = data["hawkbit"] = dict(OPTIONAL["hawkbit"], **given)
        url = c.string("hawkbit.url", hb["url"])
        if not _HAWKBIT_URL.match(url):
            c.fail("hawkbit.url", f"expected http(s)://host[:port] of the hawkBit server, got {url!r}")
        if not _HAWKBIT_ID.match(c.string("hawkbit.tenant", hb["tenant"])):
            c.fail("hawkbit.tenant", f"expected a tenant name (letters, digits, . _ : -), got {hb['tenant']!r}")
        if hb["device_id"] is not None and not (isinstance(hb["device_id"], str) and
                                                _HAWKBIT_ID.match(hb["device_id"])):
            c.fail("hawkbit.device_id", f"expected a controller id (letters, digits, . _ : -, at most 64) "
                   f"or null, got {_show(hb['device_id'])}")
        c.integer("hawkbit.poll_s", hb["poll_s"], 1, 7 * 24 * 3600)
        c.integer("hawkbit.retry", hb["retry"], 0, 1000)
        c.integer("hawkbit.retry_wait_s", hb["retry_wait_s"], 0, 3600)
        if not isinstance(hb["check_cert"], bool):
            c.fail("hawkbit.check_cert", f"expected true or false, got {_show(hb['check_cert'])}")
    return DeviceConfig(data)


SWUPDATE_CFG = "swupdate.cfg"


def suricatta_cfg(config):
    """swupdate.cfg (libconfig syntax) with the suricatta section for the
    config's hawkbit settings, or None without them. SWUpdate reads it with
    `swupdate -f swupdate.cfg -u ""`; the device passes its id with -i when
    hawkbit.device_id is null (one bundle serves the whole fleet)."""
    hb = config.data.get("hawkbit")
    if hb is None:
        return None
    # swupdate refuses a config file without a globals section
    lines = ["# written by edgerun package from edgerun.yaml's hawkbit section", "globals :", "{",
             "\tloglevel = 5;", "};", "suricatta :", "{",
             f'\ttenant = "{hb["tenant"]}";', f'\turl = "{hb["url"].rstrip("/")}";']
    if hb["device_id"] is not None:
        lines.append(f'\tid = "{hb["device_id"]}";')
    lines += [f"\tpolldelay = {hb['poll_s']};", f"\tretry = {hb['retry']};",
              f"\tretrywait = {hb['retry_wait_s']};", f"\tnocheckcert = {'false' if hb['check_cert'] else 'true'};",
              "};", ""]
    return "\n".join(lines)


def loads(text, source=FILE_NAME, check_cpus=False):
    try:
        import yaml
    except ImportError:
        raise ConfigError("PyYAML is not installed; pip install pyyaml (or apt-get install python3-yaml)") \
            from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError(f"{source}: {where}not valid YAML: {getattr(e, 'problem', None) or e}") from None
    return validate(raw, source, check_cpus)


def load(path, check_cpus=False):
    """Reads and validates edgerun.yaml; relative paths resolve against its folder."""
    p = pathlib.Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such configuration file; check the path") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    cfg = loads(text, str(p), check_cpus)
    cfg.path, cfg.base = p, p.parent
    return cfg


def dump(data):
    """YAML text of a config dict, sections in schema order."""
    import yaml
    head = "# edgerun device configuration (see edgerun/ota/device_config.py for every field)\n"
    ordered = {k: data[k] for k in list(DEFAULTS) + list(OPTIONAL) if k in data}
    return head + yaml.safe_dump(ordered, sort_keys=False, default_flow_style=None, allow_unicode=True)


def make(model_path, health_prompt, health_expect, root="/opt/edgerun", slot_names=("rootfs-a", "rootfs-b"),
         threads=1, n_ctx=0, health_max_tokens=16, budget_mib=256, **overrides):
    """A validated config from the usual few choices (used by `edgerun package`
    when no --config is given). overrides: {"section": {field: value}}."""
    raw = {"model": {"path": str(model_path), "n_ctx": n_ctx},
           "threads": {"count": threads},
           "arena": {"budget_mib": budget_mib},
           "slots": {"root": str(root), "names": list(slot_names)},
           "health_check": {"prompt": health_prompt, "expect": health_expect, "max_tokens": health_max_tokens}}
    for sec, vals in overrides.items():
        raw.setdefault(sec, {}).update(vals)
    return validate(raw, "<generated config>")


# ------------------------------------------------------------------ using it

def open_model(config, base=None):
    """edgerun.Model for the model the config names: pins the process to
    threads.pin (every worker thread the runtime starts inherits it), checks the
    arena plan against arena.budget_mib before allocating anything, then opens.
    `config`: a DeviceConfig or a path to edgerun.yaml."""
    from .. import model as _model
    cfg = config if isinstance(config, DeviceConfig) else load(config, check_cpus=True)
    path = cfg.model_path(base)
    if not path.is_file():
        raise ConfigError(f"{cfg.path or FILE_NAME}: model.path: {path} does not exist; "
                          "install a bundle with that model or fix the path", "model.path")
    pin = cfg["threads"]["pin"]
    if pin:
        try:
            os.sched_setaffinity(0, set(pin))
        except (AttributeError, OSError) as e:
            raise ConfigError(f"{cfg.path or FILE_NAME}: threads.pin: cannot pin to CPUs {pin}: {e}",
                              "threads.pin") from None
    kw = cfg.model_kwargs()
    need = _model.plan(path, **kw)["total_bytes"]
    budget = int(cfg["arena"]["budget_mib"] * (1 << 20))
    if need > budget:
        raise ConfigError(f"{cfg.path or FILE_NAME}: arena.budget_mib: the arena for {path.name} with "
                          f"n_ctx={kw['n_ctx']} and {kw['n_threads']} threads needs {need / (1 << 20):.1f} MiB, "
                          f"more than the budget of {cfg['arena']['budget_mib']} MiB; lower model.n_ctx or "
                          "raise the budget", "arena.budget_mib")
    return _model.Model(path, **kw)


def generate(config, model, prompt=None, **override):
    """Model.generate with the config's sampling defaults (override any)."""
    kw = config.sampling_kwargs()
    kw.update(override)
    return model.generate(prompt if prompt is not None else config["health_check"]["prompt"], **kw)


# `edgerun run` option -> (config section, field); an option still at its
# command-line default takes the config's value, one given explicitly wins.
_RUN_OPTIONS = {"temp": ("sampling", "temperature", 0.0), "top_k": ("sampling", "top_k", 0),
                "top_p": ("sampling", "top_p", 1.0), "min_p": ("sampling", "min_p", 0.0),
                "repeat_penalty": ("sampling", "repeat_penalty", 1.0),
                "repeat_last_n": ("sampling", "repeat_last_n", 0), "seed": ("sampling", "seed", None),
                "max_tokens": ("sampling", "max_tokens", 64)}


def apply_to_run_args(config, args):
    """`edgerun run --config FILE PROMPT`: fills the sampling options the user
    left at their defaults from the config; returns the config (loaded and
    checked against this machine's CPUs). The model, threads, pinning and
    arena budget come from the config through open_model()."""
    cfg = config if isinstance(config, DeviceConfig) else load(config, check_cpus=True)
    if len(args.args) != 1:
        raise ConfigError(f"{cfg.path}: with --config give only the PROMPT; the model is model.path "
                          f"({cfg['model']['path']})", "model.path")
    for opt, (sec, field, default) in _RUN_OPTIONS.items():
        if getattr(args, opt, default) == default:
            setattr(args, opt, cfg[sec][field])
    return cfg
