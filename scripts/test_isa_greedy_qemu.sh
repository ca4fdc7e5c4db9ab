#!/bin/sh
# test_isa_greedy_qemu.sh — whole-model greedy tokens equal across kernel
# tables: the embedded model (models/edgerun-add.gguf) answers a few prompts
# with the native edgerun-cli forced to "generic" (the reference), then with
# a static aarch64 edgerun-cli under qemu-aarch64 forced to every table each
# emulated CPU can run:
#   cortex-a72            generic, neon
#   cortex-a76            generic, neon, neon-dotprod
#   max, SVE 128..2048    neon, neon-dotprod, sve (and neon-i8mm at 128)
# Every run must print the reference ids. One line per (cpu, table); exit 0
# when all agree, 1 on a difference or failure, 77 (meson's "skipped") when
# the cross tools or the native CLI are missing.
# Env: CROSS_CC (aarch64-linux-gnu-gcc), QEMU (qemu-aarch64), BUILD (scratch
# dir), EDGERUN_CLI (native CLI; default build/native/runtime_c/tools/edgerun-cli).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
NATIVE=${EDGERUN_CLI:-$ROOT/build/native/runtime_c/tools/edgerun-cli}
MODEL=$ROOT/models/edgerun-add.gguf
. "$ROOT/scripts/cross_kernel_objs.sh"
[ -x "$NATIVE" ] || { echo "skip: no native edgerun-cli at $NATIVE (make build, or set EDGERUN_CLI)"; exit 77; }
BUILD=${BUILD:-$(mktemp -d /tmp/edgerun-isa-greedy.XXXXXX)}
mkdir -p "$BUILD"
S="$ROOT/runtime_c/src"
K="$S/kernels"
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I$ROOT/runtime_c/include -I$S -I$ROOT/runtime_c/tools"

# The same split as kernels/meson.build: everything baseline armv8-a, each
# ISA library with its own -march; the CLI is every tools/cli_*.c beside
# edgerun_cli.c (tools/meson.build's list), and src/cuda/none.c (the CUDA
# entry points of a build without CUDA, as meson links them), statically so
# qemu needs no arm64 sysroot.
compile_kernel_objs
$CC $CFLAGS -static -o "$BUILD/edgerun-cli" \
    "$S"/*.c "$S/cuda/none.c" "$S"/tokenizer/*.c "$K"/*.c "$K"/generic/*.c "$K/neon/table_neon.c" "$K/sve/table_sve.c" \
    "$ROOT/runtime_c/tools/edgerun_cli.c" "$ROOT"/runtime_c/tools/cli_*.c "$BUILD"/*.o -lm -pthread \
    || { echo "link failed"; exit 1; }

PROMPTS="1234+5678= 9999+1= 305+4071= 0+0= 8765+4321= 42+58="
# ids <cli...>: the greedy ids of every prompt, one prompt per line
ids() {
    for p in $PROMPTS; do
        "$@" run "$MODEL" "$p" -n 16 --print-ids --no-echo -t 2 2>/dev/null || { echo "run failed"; return 1; }
    done
}
ids "$NATIVE" --isa generic >"$BUILD/want.txt" || { echo "native reference run failed"; exit 1; }

status=0
printf '%-12s %-28s %-13s %s\n' cpu "qemu -cpu" table result
check() { # label cpu-spec table
    out="$BUILD/$1-$3.txt"
    ids "$QEMU" -cpu "$2" "$BUILD/edgerun-cli" --isa "$3" >"$out"
    if cmp -s "$out" "$BUILD/want.txt"; then res=same; else res=DIFFERENT; status=1; fi
    printf '%-12s %-28s %-13s %s\n' "$1" "$2" "$3" "$res"
    [ "$res" = same ] || diff "$BUILD/want.txt" "$out" | head -n 10
}
AVX2=$("$NATIVE" run "$MODEL" "1+1=" -n 1 --isa avx2 --print-ids >/dev/null 2>&1 && echo yes)
if [ "$AVX2" = yes ]; then
    ids "$NATIVE" --isa avx2 >"$BUILD/native-avx2.txt"
    if cmp -s "$BUILD/native-avx2.txt" "$BUILD/want.txt"; then res=same; else res=DIFFERENT; status=1; fi
    printf '%-12s %-28s %-13s %s\n' native "(host)" avx2 "$res"
fi
check cortex-a72 cortex-a72 generic
check cortex-a72 cortex-a72 neon
check cortex-a76 cortex-a76 neon
check cortex-a76 cortex-a76 neon-dotprod
for vl in 128 256 512; do
    for t in neon neon-dotprod sve; do check "sve$vl" "max,sve$vl=on" "$t"; done
done
check sve128 "max,sve128=on" neon-i8mm
# qemu-user starts at 512 bits unless told the default length (in bytes)
for t in neon-dotprod sve; do check sve2048 "max,sve2048=on,sve-default-vector-length=256" "$t"; done
echo "reference (native generic) ids per prompt:"
sed 's/^/  /' "$BUILD/want.txt"
echo "logs: $BUILD"
exit $status
