#!/bin/sh
# kernel_insns_qemu.sh — instructions each Arm kernel table executes for one
# 64 x 2048 matrix product, file layout against its repacked layout, counted
# under qemu-aarch64 (-singlestep -d exec: one log line per instruction; the
# count at one product minus the count at none, scripts/kernel_insns.c).
# Without Arm hardware this is the measure of a kernel change that does not
# depend on the emulator's speed: instructions are not cycles, but a kernel
# that executes a fifth of the instructions is not slower on any core.
# Prints a markdown table: decode (m = 1) and prefill (m = PREFILL, 4
# unless set; 8 shows the 8-row tiles' gain) per table,
# vector length and type. About 2-3 minutes on 2 cores. Then a second one:
# the activation quantizers the caller runs before every product (Q8_0 for
# Q8_0/Q4_0 weights, Q8_K for the K-quants), one row of 768 and of 2,048,
# generic against neon-dotprod (the NEON and SVE tables share them) on
# cortex-a76.
# Env: CROSS_CC (aarch64-linux-gnu-gcc), QEMU (qemu-aarch64), BUILD (scratch
# dir), TYPES (default "q8_0 q4_0 q4_k q5_k q6_k"; also q4_1 q5_0 q5_1 iq4_nl
# iq4_xs q3_k q2_k), PREFILL (prefill rows, default 4), TABLES (the tables
# to count, default "sve neon-dotprod neon-i8mm": all five rows below).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
TYPES=${TYPES:-"q8_0 q4_0 q4_k q5_k q6_k"}
PREFILL=${PREFILL:-4}
TABLES=${TABLES:-"sve neon-dotprod neon-i8mm"}
. "$ROOT/scripts/cross_kernel_objs.sh"
BUILD=${BUILD:-$(mktemp -d /tmp/edgerun-insns.XXXXXX)}
mkdir -p "$BUILD"
K="$ROOT/runtime_c/src/kernels"
CFLAGS="-std=c11 -D_GNU_SOURCE -O3 -Wall -Wextra -Werror -I$ROOT/runtime_c/include -I$ROOT/runtime_c/src"
compile_kernel_objs
$CC $CFLAGS -static -o "$BUILD/kernel_insns" \
    "$K"/*.c "$K"/generic/*.c "$K/neon/table_neon.c" "$K/sve/table_sve.c" "$ROOT/runtime_c/src/error.c" \
    "$ROOT/scripts/kernel_insns.c" "$BUILD"/*.o -lm -pthread || { echo "link failed"; exit 1; }

count() { # cpu table type layout m reps
    log="$BUILD/trace.log"
    "$QEMU" -cpu "$1" -singlestep -d exec,nochain -D "$log" "$BUILD/kernel_insns" "$2" "$3" "$4" "$5" "$6" \
        >/dev/null || { echo "run failed: $*" >&2; exit 1; }
    grep -c '^Trace' "$log"
}
product() { # cpu table type layout m: instructions of one product
    echo $(( $(count "$1" "$2" "$3" "$4" "$5" 1) - $(count "$1" "$2" "$3" "$4" "$5" 0) ))
}

echo "| table | vector | type | decode, file -> repacked | prefill m = $PREFILL, file -> repacked |"
echo "|---|---|---|---:|---:|"
for spec in "sve 256 max,sve-default-vector-length=32" "sve 512 max,sve-default-vector-length=64" \
            "sve 128 max,sve-default-vector-length=16" "neon-dotprod 128 max,sve-default-vector-length=16" \
            "neon-i8mm 128 max,sve-default-vector-length=16"; do
    set -- $spec
    case " $TABLES " in *" $1 "*) ;; *) continue ;; esac
    for t in $TYPES; do
        # neon-i8mm's Q2_K, Q3_K and IQ4_XS are neon-dotprod's kernels
        case "$1:$t" in *i8mm:iq4_xs|*i8mm:q3_k|*i8mm:q2_k) continue ;; esac
        d0=$(product "$3" "$1" "$t" file 1) d1=$(product "$3" "$1" "$t" repacked 1)
        p0=$(product "$3" "$1" "$t" file "$PREFILL") p1=$(product "$3" "$1" "$t" repacked "$PREFILL")
        echo "| $1 | $2 bits | $t | $d0 -> $d1 | $p0 -> $p1 |"
    done
done

quantizer() { # cpu table kind n: instructions of one row's quantization
    echo $(( $(count "$1" "$2" quantize "$3" "$4" 1) - $(count "$1" "$2" quantize "$3" "$4" 0) ))
}
echo
echo "| activation row | Q8_0, generic -> neon-dotprod | Q8_K, generic -> neon-dotprod |"
echo "|---|---:|---:|"
for n in 768 2048; do
    echo "| $n | $(quantizer cortex-a76 generic q8_0 $n) -> $(quantizer cortex-a76 neon-dotprod q8_0 $n)" \
        "| $(quantizer cortex-a76 generic q8_k $n) -> $(quantizer cortex-a76 neon-dotprod q8_k $n) |"
done
