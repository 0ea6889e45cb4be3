#!/usr/bin/env bash
# Gathers the headers and libraries a Qt-free build needs (nlohmann-json,
# CLI11, sqlite3, zlib) into one prefix folder, for a GPU machine that has a
# compiler, CMake and CUDA but no package manager. gpu-check.sh uses it with
# -DCLUSTERSCOPE_DEPS_DIR. Run it here, on a Debian/Ubuntu machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="${1:-$ROOT/.gpu-deps}"
rm -rf "$DEPS"
mkdir -p "$DEPS/include" "$DEPS/lib"
cp -r /usr/include/nlohmann "$DEPS/include/"
cp -r /usr/include/CLI "$DEPS/include/"
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$DEPS/include/"
cp /usr/include/zlib.h /usr/include/zconf.h "$DEPS/include/" 2>/dev/null || cp /usr/include/x86_64-linux-gnu/zconf.h "$DEPS/include/"
multiarch=/usr/lib/x86_64-linux-gnu
cp -L "$multiarch/libsqlite3.so.0" "$DEPS/lib/"
ln -sf libsqlite3.so.0 "$DEPS/lib/libsqlite3.so"
cp -L "$multiarch/libz.so.1" "$DEPS/lib/" 2>/dev/null || cp -L /lib/x86_64-linux-gnu/libz.so.1 "$DEPS/lib/"
ln -sf libz.so.1 "$DEPS/lib/libz.so"
du -sh "$DEPS"
