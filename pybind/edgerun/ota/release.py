"""`edgerun release`: what a CI job runs for one board and one version, in order,
stopping at the first failure:

    build     edgerun build --board B            (cross build, build/B/)
    test      edgerun test --board B             (C tests + model checks under qemu)
    bench     edgerun bench --board B            (latency, gated on boards/B.yaml)
    package   edgerun package ...                (the signed .swu)
    publish   the bundle + index.json on the update server (edgerun.ota.publish)

Every step leaves its output in one report folder: build.json, test.json,
bench-B.json and bench-B.png, package.json (the bundle's manifest),
publish.json, and release.json (the steps, their times, the verdict). A failed
test or bench gate stops the release with a one-line reason before any bundle
is made.

A CI pipeline that already ran `edgerun test --json` and `edgerun bench` for
the board (the board matrix) passes their reports with --test-report and
--bench-report instead of running them again; they are still checked: the same
board, the same runtime build (the sha256 of its library), every check ok, and
the gates evaluated again against the board file and the stored baseline.
"""
import json
import pathlib
import sys
import time

from .. import boards
from ..errors import OtaError
from . import publish as pub


class ReleaseError(OtaError):
    """A release step failed; the message is the one-line reason."""


def _write(report_dir, name, doc):
    p = report_dir / name
    p.write_text(json.dumps(doc, indent=1) + "\n")
    return p


def _runtime_sha(build_dir):
    lib = pathlib.Path(build_dir) / "runtime_c" / "libedgerun.so"
    return pub.sha256_file(lib) if lib.is_file() else None


def check_test_report(rep, board):
    if rep.get("board") != board.name:
        raise ReleaseError(f"test: the report is for board {rep.get('board')}, not {board.name}")
    bad = [r for r in rep.get("results", []) if not r.get("ok")]
    if bad:
        r = bad[0]
        raise ReleaseError(f"test: {r['check']} failed on {r['cpu']}: {r.get('detail', '')}".rstrip(": "))
    if not rep.get("ok") or not rep.get("results"):
        raise ReleaseError(f"test: the report for {board.name} is not a pass")


def check_bench(report, board, baseline):
    """The gates of a bench report, evaluated again here; raises on a failed one."""
    from ..bench import board as bench_board
    if report.get("board") != board.name:
        raise ReleaseError(f"bench: the report is for board {report.get('board')}, not {board.name}")
    gate_list = bench_board.gates(report, board.latency, baseline)
    failed = [g for g in gate_list if g["ok"] is False]
    if failed:
        raise ReleaseError(f"bench gate failed: {failed[0]['message']}")
    return gate_list


def release(board, model, version, key, cert, to, report_dir, test_report=None, bench_report=None,
            build_dir=None, config=None, problems=None, cpus=None, bench_repeat=None, ca=None,
            log=sys.stderr):
    """Runs the chain; returns the release.json document. Raises ReleaseError
    (one line) when a step fails; the report folder keeps what ran."""
    b = boards.load(board)
    from .package import check_version
    check_version(version)
    if bench_repeat is not None and bench_repeat < 1:
        raise ValueError(f"--bench-repeat must be >= 1, got {bench_repeat}")
    if problems is not None and problems < 1:
        raise ValueError(f"--problems must be >= 1, got {problems}")
    model = pathlib.Path(model)
    if not model.is_file():
        raise FileNotFoundError(2, "No such file or directory", str(model))
    for f in (key, cert):
        if not pathlib.Path(f).is_file():
            raise FileNotFoundError(2, "No such file or directory", str(f))
    rd = pathlib.Path(report_dir)
    rd.mkdir(parents=True, exist_ok=True)
    doc = {"board": b.name, "version": version, "model": str(model), "to": str(to), "steps": [], "ok": False}

    def step(name, fn):
        t0 = time.monotonic()
        if log:
            print(f"release {b.name} {version}: {name}", file=log, flush=True)
        try:
            out = fn()
        except ReleaseError as e:
            doc["steps"].append({"step": name, "ok": False, "seconds": round(time.monotonic() - t0, 2),
                                 "reason": str(e)})
            doc["reason"] = str(e)
            _write(rd, "release.json", doc)
            raise
        except Exception as e:
            msg = f"{name}: {e}"
            doc["steps"].append({"step": name, "ok": False, "seconds": round(time.monotonic() - t0, 2),
                                 "reason": msg})
            doc["reason"] = msg
            _write(rd, "release.json", doc)
            raise ReleaseError(msg) from e
        doc["steps"].append({"step": name, "ok": True, "seconds": round(time.monotonic() - t0, 2)})
        return out

    # build
    def do_build():
        from ..boards import build
        bdir = pathlib.Path(build_dir) if build_dir else build.ensure_built(b, log=log)
        info = {"board": b.name, "build_dir": str(bdir), "libedgerun_sha256": _runtime_sha(bdir)}
        if info["libedgerun_sha256"] is None:
            raise ReleaseError(f"build: {bdir} has no runtime_c/libedgerun.so")
        _write(rd, "build.json", info)
        return bdir, info
    bdir, binfo = step("build", do_build)

    # test
    def do_test():
        if test_report:
            rep = json.loads(pathlib.Path(test_report).read_text())
            if rep.get("build_dir") and _runtime_sha(rep["build_dir"]) not in (None, binfo["libedgerun_sha256"]):
                raise ReleaseError(f"test: {test_report} tested another build of the runtime than {bdir}")
        else:
            from ..boards import tests as board_tests
            kw = {"problems": problems} if problems else {}
            rep = board_tests.run_board_tests(b, cpus=cpus, log=log, **kw)
        _write(rd, "test.json", rep)
        check_test_report(rep, b)
        return rep
    step("test", do_test)

    # bench
    def do_bench():
        from ..bench import board as bench_board
        baseline = bench_board.load_baseline(bench_board.baseline_path(b.name))
        if bench_report:
            rep = json.loads(pathlib.Path(bench_report).read_text())
            rep = {k: v for k, v in rep.items() if k not in ("gates", "passed")}
        else:
            say = (lambda *a: print(*a, file=log)) if log else (lambda *a: None)
            # the repeat count is not part of the workload a baseline is
            # compared on: fewer repeats gate the same figures, less smoothed
            kw = {"repeat": bench_repeat} if bench_repeat else {}
            rep = bench_board.bench_board(b, bdir, model, rd / "bench", cpus=cpus, log=say, **kw)
        gate_list = bench_board.gates(rep, b.latency, baseline)
        bench_board.write_outputs(rep, gate_list, rd)      # JSON and the PNG, also when a gate fails
        check_bench(rep, b, baseline)
        return rep
    step("bench", do_bench)

    # package
    bundle = rd / f"edgerun-{b.name}-{version}.swu"

    def do_package():
        from .package import package
        man = package(b.name, model, version, key, cert, bundle, config=config, build_dir=bdir, log=log)
        _write(rd, "package.json", man)
        return man
    man = step("package", do_package)

    def do_publish():
        res = pub.publish(bundle, man, to, log=log, ca=ca)
        _write(rd, "publish.json", res)
        return res
    res = step("publish", do_publish)
    doc.update(ok=True, bundle=str(bundle), url=res["url"], sha256=res["entry"]["sha256"])
    _write(rd, "release.json", doc)
    return doc
