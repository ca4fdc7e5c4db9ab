"""The model to serve on a device: the one the active slot's edgerun.yaml
names. A device root holds two A/B slots and `current`, a symlink to the
active one; an update switches `current` only after the new slot passed its
health check (edgerun.ota), so <root>/current/edgerun.yaml is always the
config of a health-checked slot.

As device_config.open_model does for one session, but with the arena planned
for `parallel` sessions (one KV cache each), which is what the config's
arena budget must cover."""
import os
import pathlib

from .binding import errors


def config_file(path):
    """edgerun.yaml itself, or a device root folder -> its active slot's."""
    from ..ota.device_config import FILE_NAME
    from ..ota import LINK
    p = pathlib.Path(path)
    if p.is_dir():
        active = p / LINK
        if not active.exists():
            raise errors.FileAccessError(
                f"{p}: no active slot ({LINK} is missing); flash a bundle first, or pass an edgerun.yaml", -2)
        p = active / FILE_NAME
    if not p.is_file():
        raise errors.FileAccessError(f"{p}: no such device configuration", -2)
    return p


def open_model(path, parallel):
    """(edgerun.Model opened for `parallel` sessions, the DeviceConfig)."""
    from ..ota import device_config
    from ..model import Model, plan
    cfg = device_config.load(config_file(path), check_cpus=True)
    model_path = cfg.model_path()
    if not model_path.is_file():
        raise errors.ConfigError(f"{cfg.path}: model.path: {model_path} does not exist", "model.path")
    pin = cfg["threads"]["pin"]
    if pin:
        try:
            os.sched_setaffinity(0, set(pin))
        except (AttributeError, OSError) as e:
            raise errors.ConfigError(f"{cfg.path}: threads.pin: cannot pin to CPUs {pin}: {e}",
                                            "threads.pin") from None
    kw = dict(cfg.model_kwargs(), n_sessions=parallel)
    need = plan(model_path, **kw)["total_bytes"]
    budget = int(cfg["arena"]["budget_mib"] * (1 << 20))
    if need > budget:
        raise errors.ConfigError(
            f"{cfg.path}: arena.budget_mib: serving {model_path.name} with {parallel} slot(s) of "
            f"n_ctx={kw['n_ctx']} needs {need / (1 << 20):.1f} MiB, more than the budget of "
            f"{cfg['arena']['budget_mib']} MiB; lower --parallel or model.n_ctx, or raise the budget",
            "arena.budget_mib")
    return Model(model_path, **kw), cfg
