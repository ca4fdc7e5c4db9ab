#!/bin/sh
# test_kernels_qemu.sh — cross-compiles the kernel test (runtime_c/tests/
# test_kernels_isa.c, every table against generic) for aarch64 and runs it
# under qemu-aarch64 on the CPUs our boards stand for:
#   cortex-a72        NEON only            (table "neon"; no SDOT)
#   cortex-a76        NEON + dotprod, fp16 ("neon", "neon-dotprod")
#   max, SVE 128..2048 bits, i8mm          ("neon", "neon-dotprod", "neon-i8mm", "sve")
# and prints one summary line per CPU. Exit status 0 when every run passes,
# 1 when one fails, 77 (meson's "skipped") when the cross tools are missing.
# Static linking keeps qemu independent of an arm64 sysroot at run time.
# Takes about 1-2 minutes on 2 cores (compile ~20 s, each qemu run ~10 s).
# Env: CROSS_CC (aarch64-linux-gnu-gcc; "clang --target=aarch64-linux-gnu"
# works too), QEMU (qemu-aarch64), BUILD (scratch dir).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
for tool in "${CC%% *}" "$QEMU"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skip: $tool not found (apt-get install gcc-aarch64-linux-gnu qemu-user libc6-dev-arm64-cross)"
        exit 77
    fi
done
BUILD=${BUILD:-$(mktemp -d /tmp/edgerun-qemu.XXXXXX)}
mkdir -p "$BUILD"
K="$ROOT/runtime_c/src/kernels"
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I$ROOT/runtime_c/include -I$ROOT/runtime_c/src"

# The same split as kernels/meson.build: baseline files, then each ISA
# library with its own -march.
compile() { # out.o flags... src
    out=$1; shift
    $CC $CFLAGS "$@" -c -o "$BUILD/$out" || { echo "compile failed: $*"; exit 1; }
}
compile neon_q.o -DER_NEON_DOTPROD=0 "$K/neon/q_neon.c"
compile neon_float.o "$K/neon/float_neon.c"
compile neon_ew.o "$K/neon/ew_neon.c"
compile neon_rope.o "$K/neon/rope_neon.c"
compile neon_rlayout.o "$K/neon/repack_layout_neon.c"
compile neon_rq.o -DER_NEON_DOTPROD=0 "$K/neon/repack_q_neon.c"
compile neon_rq4k.o -DER_NEON_DOTPROD=0 "$K/neon/repack_q4_k_neon.c"
compile neondp_q.o -march=armv8.2-a+dotprod -DER_NEON_DOTPROD=1 "$K/neon/q_neon.c"
compile neondp_rq.o -march=armv8.2-a+dotprod -DER_NEON_DOTPROD=1 "$K/neon/repack_q_neon.c"
compile neondp_rq4k.o -march=armv8.2-a+dotprod -DER_NEON_DOTPROD=1 "$K/neon/repack_q4_k_neon.c"
compile neoni8.o -march=armv8.2-a+dotprod+i8mm "$K/neon/i8mm_neon.c"
compile sve_q.o -march=armv8.2-a+sve "$K/sve/q_sve.c"
compile sve_float.o -march=armv8.2-a+sve "$K/sve/float_sve.c"
$CC $CFLAGS -static -o "$BUILD/test_kernels_isa" \
    "$K"/*.c "$K"/generic/*.c "$K/neon/table_neon.c" "$K/sve/table_sve.c" "$ROOT/runtime_c/src/error.c" \
    "$ROOT/runtime_c/tests/test_kernels_isa.c" "$BUILD"/*.o -lm -pthread || { echo "link failed"; exit 1; }

status=0
printf '%-14s %-28s %-6s %s\n' "cpu" "qemu -cpu" "result" "tables run (automatic choice)"
run() { # label cpu-spec
    log="$BUILD/$1.log"
    if "$QEMU" -cpu "$2" "$BUILD/test_kernels_isa" >"$log" 2>&1; then res=ok; else res=FAIL; status=1; fi
    tables=$(grep -E '^table .* (ok|FAILED)$' "$log" | awk '{printf "%s%s:%s", sep, $2, $3; sep=" "}')
    auto=$(sed -n 's/^automatic choice: \([^:]*\):.*/\1/p' "$log")
    printf '%-14s %-28s %-6s %s (%s)\n' "$1" "$2" "$res" "$tables" "$auto"
    [ "$res" = ok ] || sed -n '/FAIL/p' "$log" | head -n 20
}
run cortex-a72 cortex-a72
run cortex-a76 cortex-a76
run sve128 max,sve128=on
run sve256 max,sve256=on
run sve512 max,sve512=on
# qemu-user starts at 512 bits unless told the default length (in bytes)
run sve2048 max,sve2048=on,sve-default-vector-length=256
echo "logs: $BUILD"
exit $status
