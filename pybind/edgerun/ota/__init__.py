"""Over-the-air updates: signed SWUpdate bundles, A/B slots, and the device
configuration that says what a slot runs.

    import edgerun.ota as ota                      # on the device (examples/device/ota_update.py)
    bundle = ota.verify("update.swu", "cert.pem", hardware="rpi5")
    ota.install(bundle, ota.LocalTarget("/data/edgerun"))

    updater         verify(), install(), rollback(), health_check(), swap(): the A/B slots
    package         `edgerun package`: a slot's contents as a signed .swu
    flash           `edgerun flash` / `rollback`: install onto a folder or over ssh
    device_config   edgerun.yaml: load(), validate(), open_model()
    keygen          `edgerun keygen`: signing key and certificate (openssl)
    cpio, swdesc    the bundle's container and its sw-description
"""
from .updater import (HISTORY, LINK, Bundle, LocalTarget, active_slot, check_signature, check_slot_files,
                      health_check, history, install, record, report, rollback, swap, verify)

__all__ = ["Bundle", "LocalTarget", "verify", "install", "rollback", "health_check", "swap", "active_slot",
           "history", "record", "report", "check_signature", "check_slot_files", "HISTORY", "LINK"]
