#!/usr/bin/env bash
# Sets up a fresh Debian 12/13 machine for building, testing and demonstrating
# edgerun, and does nothing when it is already set up (so every make target can
# call it). Steps:
#   1. apt packages (apt-get update only when something is missing);
#   2. .venv (python3 -m venv --system-site-packages), reusing packages that the
#      system Python already has;
#   3. pip packages into .venv, skipped while a stamp keyed on the requirement
#      list (and the Python version) is present.
# Options (environment):
#   EDGERUN_SETUP_BENCH=1  also install llama-cpp-python with its server extra
#                          (compiles llama.cpp; minutes)
#   EDGERUN_SETUP_CROSS=0  skip the aarch64 cross compiler and qemu-user
# Not installed here: the CUDA toolkit (`make build-cuda`, the CUDA checks of
# `make test`). Get nvcc 13.x from NVIDIA's apt repository (cuda-toolkit-13-0,
# https://developer.nvidia.com/cuda-downloads), and for Jetson cross builds
# also cuda-cross-aarch64-13-0; without it those steps say so and skip.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
say() { printf 'setup: %s\n' "$*"; }

# ---- 1. apt ------------------------------------------------------------------
# The build and the tests need these. meson comes from pip as well, because
# Debian 12's meson (1.0) is older than the >=1.1 that meson.build asks for.
APT_CORE=(build-essential clang meson ninja-build python3 python3-venv python3-dev pkg-config)
# The board driver (cross builds, runs under emulation) needs these; a failure
# to install them must not stop a native build and test.
# (libc6-dev-arm64-cross: the aarch64 sysroot /usr/aarch64-linux-gnu that links
# the builds and that qemu-aarch64 -L loads; apt would skip it as a mere
# recommendation with --no-install-recommends.)
APT_CROSS=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
# OTA tests (edgerun package/flash): the real SWUpdate checks and installs the
# bundles, and an OpenSSH server on 127.0.0.1 stands in for a device; the
# tests skip without them, so a failure to install them only warns.
# lighttpd (+ WebDAV): the update server the release tests publish to and devices pull from;
# nginx-light (its dav module and TLS): the same over https, with a test CA
APT_OTA=(swupdate openssh-server openssh-client openssl lighttpd lighttpd-mod-webdav nginx-light)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
fi

missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf '%s\n' "$p"
  done
}

apt_updated=0
apt_install() {
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    say "missing Debian packages: $* — run as root or install sudo, then: apt-get install $*" >&2
    return 1
  fi
  if [ "$apt_updated" -eq 0 ]; then
    say "apt-get update"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  say "apt-get install $*"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

if command -v dpkg-query >/dev/null 2>&1; then
  mapfile -t need < <(missing "${APT_CORE[@]}")
  if [ "${#need[@]}" -gt 0 ]; then apt_install "${need[@]}"; fi
  # libFuzzer and clang's sanitizer runtimes (make fuzz, make test-tsan) are in
  # libclang-rt-N-dev, which clang only recommends, so --no-install-recommends
  # leaves it out; N is the major version of the clang just installed
  # (Debian 12: 14, Debian 13: 19).
  clang_major="$(clang -dumpversion 2>/dev/null | cut -d. -f1 || true)"
  if [ -n "$clang_major" ]; then
    mapfile -t need < <(missing "libclang-rt-$clang_major-dev")
    if [ "${#need[@]}" -gt 0 ]; then
      apt_install "${need[@]}" || say "warning: could not install ${need[*]} (make fuzz and make test-tsan need it)" >&2
    fi
  fi
  mapfile -t need < <(missing "${APT_OTA[@]}")
  if [ "${#need[@]}" -gt 0 ]; then
    apt_install "${need[@]}" || say "warning: could not install ${need[*]} (only the OTA tests need them)" >&2
  fi
  if [ "${EDGERUN_SETUP_CROSS:-1}" != "0" ]; then
    mapfile -t need < <(missing "${APT_CROSS[@]}")
    if [ "${#need[@]}" -gt 0 ]; then
      apt_install "${need[@]}" || say "warning: could not install ${need[*]} (only cross builds need them)" >&2
    fi
  fi
else
  say "not a Debian system (no dpkg-query): skipping apt; make sure a C compiler, clang, ninja and python3-venv are installed"
fi

# ---- 2. venv -----------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  python3 -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"

# ---- 3. pip ------------------------------------------------------------------
# torch is pinned exactly: this machine type serves a local CPU build of that
# version, and any other spec pulls a multi-gigabyte CUDA build from the index.
PIP_REQS=(
  "torch==2.13.0"
  transformers tokenizers sentencepiece safetensors gguf
  # transformers reads a tokenizer.model (Gemma's tokenizer class, the
  # reference of tests/test_tokenizer_families.py) through protobuf.
  protobuf
  pytest hypothesis cffi numpy meson-python "meson>=1.1" ninja
  # HF tokenizers classify characters with Unicode 16; Python 3.11's own
  # unicodedata is 14, so the table-freshness test needs the backport.
  "unicodedata2==16.0.0"
  # the board driver (edgerun boards/build/test) reads boards/*.yaml
  pyyaml
  # edgerun bench --board draws its latency plot (PNG) with matplotlib.
  matplotlib
  # progress bars and tables on a terminal (edgerun/console.py)
  rich
  # chat templates (edgerun.chat): the same sandboxed engine transformers uses
  "jinja2>=3.1.6"
  # edgerun serve: the ASGI stack, the official OpenAI client its tests drive it
  # with, and httpx for the raw requests of the bad-input tests (openai 3.x
  # no longer pulls httpx itself)
  starlette uvicorn openai httpx
  # the workflow check of tests/test_release_ci.py: check-jsonschema with its
  # vendored GitHub workflow schema (actionlint has no PyPI wheel; its sdist
  # downloads the binary from GitHub)
  check-jsonschema
)
# pip_group NAME CHECK REQ...: installs REQ... unless the stamp for exactly this
# list (and this Python) exists; CHECK is an import line run afterwards.
pip_group() {
  local name="$1" check="$2"; shift 2
  local key stamp
  key="$(printf '%s\n' "$@" "$("$PY" -c 'import sys; print(sys.version)')" | sha256sum | cut -c1-16)"
  stamp="$VENV/.edgerun-$name-$key"
  if [ -f "$stamp" ]; then
    say "$name packages up to date"
    return 0
  fi
  say "pip install $*"
  # llama-cpp-python compiles llama.cpp with cmake: let it use every core.
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip install -q "$@"
  "$PY" -c "$check"
  rm -f "$VENV/.edgerun-$name-"*
  touch "$stamp"
}

pip_group base 'import torch, transformers, tokenizers, sentencepiece, safetensors, gguf, pytest, hypothesis, cffi, numpy, mesonpy, unicodedata2, matplotlib, yaml, rich, jinja2, starlette, uvicorn, openai, httpx' "${PIP_REQS[@]}"
if [ "${EDGERUN_SETUP_BENCH:-0}" = "1" ]; then
  # the server extra: llama.cpp's OpenAI server, bench_serve's peer (fastapi, sse-starlette, ...)
  pip_group bench 'import llama_cpp, llama_cpp.server.app, tiktoken, matplotlib' "llama-cpp-python[server]" tiktoken matplotlib
fi
say "ready: $PY"
