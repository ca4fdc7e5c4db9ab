#!/bin/sh
# test_kernels_qemu.sh — cross-compiles the kernel tests (runtime_c/tests/
# test_kernels_isa.c, every table against generic; test_repack_arm.c, every
# table's interleaved layouts; test_quant_vectors.c, every table's
# dequantizers against gguf-py's bits) for aarch64 and runs them under qemu-aarch64
# on the CPUs our boards stand for, SVE up to 2048 bits (the board tests in
# CI stop at 512):
#   cortex-a72        NEON only            (table "neon"; no SDOT)
#   cortex-a76        NEON + dotprod, fp16 ("neon", "neon-dotprod")
#   max, SVE 128..2048 bits, i8mm          ("neon", "neon-dotprod", "neon-i8mm", "sve")
# and prints one summary line per CPU. Exit status 0 when every run passes,
# 1 when one fails, 77 (meson's "skipped") when the cross tools are missing.
# Static linking keeps qemu independent of an arm64 sysroot at run time.
# Takes about 4 minutes on 2 cores (compile ~30 s, then the six CPUs side
# by side, 7 minutes of CPU time; the 2048-bit repack test alone is 80 s).
# Env: CROSS_CC (aarch64-linux-gnu-gcc; "clang --target=aarch64-linux-gnu"
# works too), QEMU (qemu-aarch64), BUILD (scratch dir).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
. "$ROOT/scripts/cross_kernel_objs.sh"
BUILD=${BUILD:-$(mktemp -d /tmp/edgerun-qemu.XXXXXX)}
mkdir -p "$BUILD"
K="$ROOT/runtime_c/src/kernels"
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I$ROOT/runtime_c/include -I$ROOT/runtime_c/src"

# The same split as kernels/meson.build: baseline files, then each ISA
# library with its own -march.
compile_kernel_objs
for t in test_kernels_isa test_repack_arm test_quant_vectors; do
    $CC $CFLAGS -static -o "$BUILD/$t" \
        "$K"/*.c "$K"/generic/*.c "$K/neon/table_neon.c" "$K/sve/table_sve.c" "$ROOT/runtime_c/src/error.c" \
        "$ROOT/runtime_c/tests/$t.c" "$BUILD"/*.o -lm -pthread || { echo "link failed: $t"; exit 1; }
done

printf '%-14s %-28s %-6s %s\n' "cpu" "qemu -cpu" "result" "tables run (automatic choice)"
# One CPU per background job (each writes its own summary and status), then
# the summaries in order: the runs are independent and single-threaded, so
# on 2 cores this halves the wall time.
run() { # label cpu-spec
    log="$BUILD/$1.log" rlog="$BUILD/$1-repack.log" res=ok
    "$QEMU" -cpu "$2" "$BUILD/test_kernels_isa" >"$log" 2>&1 || res=FAIL
    "$QEMU" -cpu "$2" "$BUILD/test_repack_arm" >"$rlog" 2>&1 || res=FAIL
    "$QEMU" -cpu "$2" "$BUILD/test_quant_vectors" "$ROOT/runtime_c/tests/data/quant_vectors.bin" >>"$log" 2>&1 ||
        res=FAIL
    tables=$(grep -E '^table .* (ok|FAILED)$' "$log" | awk '{printf "%s%s:%s", sep, $2, $3; sep=" "}')
    rows=$(grep -E '^table .* rows each (ok|FAILED)$' "$rlog" | awk '{printf "%s%s:%s", sep, $2, $5; sep=" "}')
    auto=$(sed -n 's/^automatic choice: \([^:]*\):.*/\1/p' "$log")
    {
        printf '%-14s %-28s %-6s %s (%s); rows per repacked group: %s\n' "$1" "$2" "$res" "$tables" "$auto" "$rows"
        [ "$res" = ok ] || sed -n '/FAIL/p' "$log" "$rlog" | head -n 20
    } >"$BUILD/$1.summary"
    [ "$res" = ok ]
}
LABELS="cortex-a72 cortex-a76 sve128 sve256 sve512 sve2048"
run cortex-a72 cortex-a72 & p1=$!
run cortex-a76 cortex-a76 & p2=$!
run sve128 max,sve128=on & p3=$!
run sve256 max,sve256=on & p4=$!
run sve512 max,sve512=on & p5=$!
# qemu-user starts at 512 bits unless told the default length (in bytes)
run sve2048 max,sve2048=on,sve-default-vector-length=256 & p6=$!
status=0
for p in $p1 $p2 $p3 $p4 $p5 $p6; do wait "$p" || status=1; done
for l in $LABELS; do cat "$BUILD/$l.summary"; done
echo "logs: $BUILD"
exit $status
