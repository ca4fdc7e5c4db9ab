#!/bin/sh
# test_decode_batch (runtime_c/tests/test_decode_batch.c) for aarch64 under
# qemu-aarch64 -cpu max: er_decode_batch's logits bit for bit er_decode's on
# every Arm kernel table (neon, neon-dotprod, neon-i8mm, sve) without Arm
# hardware. Built static with the cross compiler, as test_kernels_qemu.sh
# builds its tests. ~5 min on 2 cores.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
. "$ROOT/scripts/cross_kernel_objs.sh"
BUILD=${BUILD:-$(mktemp -d /tmp/edgerun-qemu-batch.XXXXXX)}
mkdir -p "$BUILD"
K="$ROOT/runtime_c/src/kernels"
S="$ROOT/runtime_c/src"
CFLAGS="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I$ROOT/runtime_c/include -I$S"
compile_kernel_objs
CORE="error arena gguf gguf_types plan family model forward session sampler threadpool repack snapshot trace live kv_shift"
TOK="unicode unicode_tables pretokenize normalize nfc_tables vocab spm bpe tokenize detok"
SRCS="$S/cuda/none.c"
for f in $CORE; do SRCS="$SRCS $S/$f.c"; done
for f in $TOK; do SRCS="$SRCS $S/tokenizer/$f.c"; done
# shellcheck disable=SC2086
$CC $CFLAGS -static -o "$BUILD/test_decode_batch" $SRCS "$K"/*.c "$K"/generic/*.c "$K/neon/table_neon.c" \
    "$K/sve/table_sve.c" "$ROOT/runtime_c/tests/test_decode_batch.c" "$BUILD"/*.o -lm -pthread ||
    { echo "link failed"; exit 1; }
$QEMU -cpu max "$BUILD/test_decode_batch" "$ROOT/models/edgerun-add.gguf"
