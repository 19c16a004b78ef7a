#!/usr/bin/env bash
# Regenerates every committed BPF object src/bpf/obj/<name>.bpf.o from bpf/<name>.bpf.c.
# Needs clang and libbpf-dev (for <bpf/bpf_helpers.h>); bpf/vmlinux.h is committed, so bpftool
# is not needed. The objects are committed so that building iolens needs only Rust and gcc;
# scripts/test.sh runs this into a temporary directory (`scripts/build-bpf.sh DIR`) and fails
# when an object differs from the one in src/bpf/obj.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-src/bpf/obj}"
mkdir -p "$out"
for src in bpf/*.bpf.c; do
  name=$(basename "$src" .c)
  # -g keeps BTF (needed for CO-RE relocation and tp_btf); strip DWARF so the object is small
  # and does not embed this machine's paths (the prefix maps keep the BTF line info free of the
  # checkout's path, so a checkout anywhere rebuilds byte-identical objects).
  clang -O2 -g -fdebug-prefix-map="$PWD"=. -ffile-prefix-map="$PWD"=. -target bpf -D__TARGET_ARCH_x86 -Ibpf -c "$src" -o "$out/$name.o.tmp"
  llvm-strip -g "$out/$name.o.tmp"
  mv "$out/$name.o.tmp" "$out/$name.o"
done
