# cross_kernel_objs.sh — sourced by the qemu scripts (test_kernels_qemu.sh,
# test_isa_greedy_qemu.sh, kernel_insns_qemu.sh) right after they set CC and
# QEMU: exits 77 (meson's "skipped") when the cross compiler or qemu-aarch64
# is missing, and defines compile_kernel_objs, which compiles the aarch64
# kernel files that need their own -march into $BUILD, split as
# kernels/meson.build splits them. Files are found by globbing, not listed,
# so a new or renamed kernel file cannot leave these scripts behind (a
# hand-kept list once named a file that had been renamed, and the long test
# failed at compile):
#   neon/*.c except the table and i8mm   baseline armv8-a, ER_NEON_DOTPROD=0
#   those of them that test ER_NEON_DOTPROD   again with +dotprod, =1 (the SDOT twins)
#   neon/i8mm_*.c                        +dotprod+i8mm
#   sve/*.c except the table             +sve
# The tables (table_*.c) only store addresses and are compiled with the
# baseline sources by the caller. compile_kernel_objs needs CFLAGS, BUILD, K.
for tool in "${CC%% *}" "$QEMU"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skip: $tool not found (apt-get install gcc-aarch64-linux-gnu qemu-user libc6-dev-arm64-cross)"
        exit 77
    fi
done

compile() { # out.o flags... src
    out=$1; shift
    $CC $CFLAGS "$@" -c -o "$BUILD/$out" || { echo "compile failed: $*"; exit 1; }
}

compile_kernel_objs() {
    for src in "$K"/neon/*.c; do
        base=$(basename "$src" .c)
        case $base in table_neon|i8mm_*) continue ;; esac
        compile "neon_$base.o" -DER_NEON_DOTPROD=0 "$src"
        if grep -q ER_NEON_DOTPROD "$src"; then
            compile "neondp_$base.o" -march=armv8.2-a+dotprod -DER_NEON_DOTPROD=1 "$src"
        fi
    done
    for src in "$K"/neon/i8mm_*.c; do
        compile "neoni8_$(basename "$src" .c).o" -march=armv8.2-a+dotprod+i8mm "$src"
    done
    for src in "$K"/sve/*.c; do
        base=$(basename "$src" .c)
        [ "$base" = table_sve ] && continue
        compile "sve_$base.o" -march=armv8.2-a+sve "$src"
    done
}
