#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [HARNESS...] — builds the libFuzzer harnesses
# (runtime_c/tests/fuzz_<harness>.c: gguf, tokenizer, snapshot) with clang,
# ASan and UBSan, and runs each for SECONDS (default 60). `make fuzz` calls it;
# CI runs it with 60.
#
# The runtime is built once by meson into $FUZZ_BUILD/lib (default
# /tmp/edgerun-fuzz) with coverage instrumentation, so the SIMD kernels get
# their per-file ISA flags exactly as in a normal build. Each harness starts
# from a copy of its checked-in corpus (runtime_c/tests/corpus/fuzz_<h>/) and
# writes crashes to $FUZZ_BUILD/artifacts/<h>/. A crash is a bug: fix it, then
# copy the input into runtime_c/tests/corpus/fuzz_<h>/ — `meson test` replays
# that folder (fuzz_replay_<h>) in every build, sanitizers included.
# On a finding it prints the report and the input in base64, so a CI log is
# enough to replay it: `base64 -d >crash`, then `$build/fuzz_<h> crash`.
# Exit status: 0 when no harness found anything.
set -euo pipefail

secs=${1:-60}
[ $# -gt 0 ] && shift
harnesses=${*:-gguf tokenizer snapshot}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD:-/tmp/edgerun-fuzz}
command -v clang >/dev/null || { echo "fuzz.sh: clang is required" >&2; exit 2; }

# $MESON: the meson command (make passes the venv's: Debian 12's /usr/bin/meson
# is older than meson.build allows); unquoted below, as it may be several words.
if [ ! -f "$build/lib/build.ninja" ]; then
  CC=clang ${MESON:-meson} setup "$build/lib" "$root" -Dpython=false -Dtests=false -Dcli=false \
    -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all" >/dev/null
fi
ninja -C "$build/lib" >/dev/null

status=0
for h in $harnesses; do
  src="$root/runtime_c/tests/fuzz_$h.c"
  [ -f "$src" ] || { echo "fuzz.sh: no harness $src" >&2; exit 2; }
  clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$root/runtime_c/include" -I"$root/runtime_c/src" "$src" \
    "$build/lib/runtime_c/libedgerun_internal.a" -lm -lpthread -o "$build/fuzz_$h"
  mkdir -p "$build/corpus/$h" "$build/artifacts/$h"
  cp -n "$root/runtime_c/tests/corpus/fuzz_$h/"* "$build/corpus/$h/" 2>/dev/null || true
  echo "== fuzz_$h for ${secs}s"
  if ! EDGERUN_FUZZ_MODEL="$root/models/edgerun-add.gguf" "$build/fuzz_$h" \
      -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$h/" "$build/corpus/$h" 2>"$build/fuzz_$h.log"; then
    status=1
    echo "fuzz_$h FOUND A CRASH (log: $build/fuzz_$h.log):"
    ls "$build/artifacts/$h/"
    # CI keeps only what is printed: the report and the input itself (base64)
    # are what it takes to replay the finding on another machine.
    grep -m1 "INFO: Seed" "$build/fuzz_$h.log" || true
    grep -E -A30 "ERROR: |runtime error|deadly signal" "$build/fuzz_$h.log" | head -n 60 || true
    for a in "$build/artifacts/$h/"*; do
      [ -f "$a" ] || continue
      echo "input $(basename "$a") ($(wc -c <"$a") bytes), base64:"
      base64 -w 100 "$a"
    done
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/fuzz_$h.log" || true
done
exit $status
