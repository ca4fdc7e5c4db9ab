"""`edgerun boards [show NAME]`: the boards in boards/*.yaml, or one of them explained."""
import json
import sys

from .. import console
from .options import formatter

EPILOG = """\
examples:
  edgerun boards                  # table of every board
  edgerun boards --json           # every board file, validated, as JSON
  edgerun boards show rpi5        # one board in prose, with its build and test settings
  edgerun boards check FILE.yaml  # validate a board file that is not in boards/ yet
"""


def register(sub):
    p = sub.add_parser("boards", help="list the target boards, or explain one",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    p.add_argument("action", nargs="?", choices=("list", "show", "check"), default="list", metavar="ACTION",
                   help="list (default), show NAME, or check FILE")
    p.add_argument("name", nargs="?", help="board name (show) or YAML path (check)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=main)


def _cores(b):
    parts = []
    for cl in ("big", "little"):
        c = b.cores[cl]
        if c["count"]:
            mhz = f" @ {c['max_mhz'] / 1000:.1f} GHz" if c.get("max_mhz") else ""
            cpus = f" (cpus {','.join(map(str, c['cpus']))})" if c.get("cpus") else ""
            parts.append(f"{c['count']}x {c['cpu']}{mhz}{cpus}")
    return " + ".join(parts) or "all online CPUs"


def _qemu(b):
    """'cortex-a76', or for SVE entries 'max (SVE 128, 256, 512)'."""
    if b.is_native:
        return "native"
    out, sve = [], {}
    for spec in b.qemu_cpus:
        bits = b.vector_bits(spec)
        if bits:
            sve.setdefault(spec.split(",")[0], []).append(str(bits))
        else:
            out.append(spec)
    out += [f"{model} (SVE {', '.join(bits)})" for model, bits in sve.items()]
    return ", ".join(out)


def list_boards(as_json):
    from .. import boards
    all_boards = boards.load_all()
    if as_json:
        print(json.dumps([b.to_dict() for b in all_boards], indent=1))
        return 0
    rows = [("board", "arch", "cpu flags", "features", "qemu -cpu (tested)")]
    for b in all_boards:
        rows.append((b.name, b.arch, " ".join(b.cflags), ",".join(b.features), _qemu(b)))
    if console.is_terminal(sys.stdout):
        console.table(rows[0], rows[1:])
    else:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            print("  ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + "  " + r[-1])
    print("\n`edgerun boards show NAME` explains one; `edgerun build --board NAME` builds for it.")
    return 0


def show(name, as_json):
    from .. import boards
    b = boards.load(name)
    if as_json:
        print(json.dumps(b.to_dict(), indent=1))
        return 0
    tc = b.toolchain_file()
    print(f"{b.name}: {b.description}")
    print()
    if b.is_native:
        print(f"Builds natively for this {b.arch} machine with {' '.join(b.cflags)} (an explicit "
              "baseline, never -march=native) and runs its tests directly, without emulation.")
    else:
        print(f"Cross-builds with {tc.relative_to(boards.repo_root())} plus {' '.join(b.cflags)} "
              f"(explicit, never native) into build/{b.name}/, and proves the build under "
              f"{b.qemu_binary} on {len(b.qemu_cpus)} CPU model{'s' if len(b.qemu_cpus) != 1 else ''}"
              + (f"; SVE code is vector-length agnostic, so it runs at "
                 f"{', '.join(str(b.vector_bits(c)) for c in b.qemu_cpus)} bits (the board has {b.sve_bits})"
                 if b.has_sve else "") + ".")
    if b.cuda:
        print(f"Its GPU is CUDA {b.cuda['arch']}: toolchains/{b.cuda_toolchain_file().name} carries the "
              "nvcc settings for when the CUDA backend exists; today the CPU path is built and tested.")
    ram = f"{b.memory['ram_mib']} MiB RAM" if b.memory["ram_mib"] else "the machine's RAM"
    print(f"edgerun may use {b.memory['budget_mib']} MiB (arena and resident weights) of {ram}. OTA images "
          f"target hardware '{b.ota['hardware']}' revision {b.ota['revision']}, slots {' / '.join(b.ota['slots'])}. "
          f"Benchmarks gate p99/p50 <= {b.latency['p99_over_p50_max']} and normalized tokens/s >= "
          f"{b.latency['min_normalized_tokens_per_s_ratio']} x the stored baseline.")
    print()
    rows = [("file", str(b.path)), ("soc", b.data["soc"]), ("cores", _cores(b)), ("arch", b.arch),
            ("toolchain", b.toolchain), ("cflags", " ".join(b.cflags)), ("features", ", ".join(b.features))]
    if b.has_sve:
        rows.append(("sve_bits", str(b.sve_bits)))
    rows.append(("qemu", _qemu(b)))
    if b.cuda:
        rows.append(("cuda", b.cuda["arch"]))
    rows += [("memory", f"ram {b.memory['ram_mib']} MiB, budget {b.memory['budget_mib']} MiB"),
             ("ota", f"{b.ota['hardware']} rev {b.ota['revision']}, slots {', '.join(b.ota['slots'])}"),
             ("latency", f"p99/p50 <= {b.latency['p99_over_p50_max']}, normalized tok/s >= "
                         f"{b.latency['min_normalized_tokens_per_s_ratio']} x baseline")]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{w}}  {v}")
    print()
    print(f"  edgerun build --board {b.name}\n  edgerun test --board {b.name}")
    return 0


def check(path, as_json):
    from .. import boards
    b = boards.load_file(path)
    print(json.dumps(b.to_dict(), indent=1) if as_json else f"{path}: ok ({b.name}: {b.description})")
    return 0


def main(args):
    from ..errors import InvalidArgumentError
    if args.action == "list":
        if args.name:
            raise InvalidArgumentError(f"unexpected argument '{args.name}'; did you mean "
                                       f"`edgerun boards show {args.name}`?")
        return list_boards(args.json)
    if not args.name:
        raise InvalidArgumentError(f"`edgerun boards {args.action}` needs a "
                                   f"{'board name' if args.action == 'show' else 'YAML file'}")
    return show(args.name, args.json) if args.action == "show" else check(args.name, args.json)
