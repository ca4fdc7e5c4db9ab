# cross_kernel_objs.sh — sourced by the qemu scripts (test_kernels_qemu.sh,
# test_isa_greedy_qemu.sh): compiles the aarch64 kernel files that need their
# own -march into $BUILD, split as kernels/meson.build splits them. Files are
# found by globbing, not listed, so a new or renamed kernel file cannot leave
# these scripts behind (a hand-kept list once named a file that had been
# renamed, and the long test failed at compile):
#   neon/*.c except the table and i8mm   baseline armv8-a, ER_NEON_DOTPROD=0
#   those of them that test ER_NEON_DOTPROD   again with +dotprod, =1 (the SDOT twins)
#   neon/i8mm_neon.c                     +dotprod+i8mm
#   sve/*.c except the table             +sve
# The tables (table_*.c) only store addresses and are compiled with the
# baseline sources by the caller. Needs CC, CFLAGS, BUILD; defines compile().
compile() { # out.o flags... src
    out=$1; shift
    $CC $CFLAGS "$@" -c -o "$BUILD/$out" || { echo "compile failed: $*"; exit 1; }
}
for src in "$K"/neon/*.c; do
    base=$(basename "$src" .c)
    case $base in table_neon|i8mm_neon) continue ;; esac
    compile "neon_$base.o" -DER_NEON_DOTPROD=0 "$src"
    if grep -q ER_NEON_DOTPROD "$src"; then
        compile "neondp_$base.o" -march=armv8.2-a+dotprod -DER_NEON_DOTPROD=1 "$src"
    fi
done
compile neoni8.o -march=armv8.2-a+dotprod+i8mm "$K/neon/i8mm_neon.c"
for src in "$K"/sve/*.c; do
    base=$(basename "$src" .c)
    [ "$base" = table_sve ] && continue
    compile "sve_$base.o" -march=armv8.2-a+sve "$src"
done
