#!/usr/bin/env bash
# Gathers the headers and libraries a Qt-free build needs (nlohmann-json,
# CLI11, sqlite3, zlib), one prefix folder each so that a library the GPU
# machine has itself is never shadowed by another's folder, for a machine
# with a compiler, CMake and CUDA but no package manager. gpu-check.sh passes
# them to CMake as CLUSTERSCOPE_DEPS_DIR. Run it here, on Debian/Ubuntu.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="${1:-$ROOT/.gpu-deps}"
rm -rf "$DEPS"
mkdir -p "$DEPS"/{nlohmann,cli11,sqlite,zlib}/include "$DEPS"/{sqlite,zlib}/lib
cp -r /usr/include/nlohmann "$DEPS/nlohmann/include/"
cp -r /usr/include/CLI "$DEPS/cli11/include/"
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$DEPS/sqlite/include/"
cp /usr/include/zlib.h "$DEPS/zlib/include/"
cp /usr/include/zconf.h "$DEPS/zlib/include/" 2>/dev/null || cp /usr/include/x86_64-linux-gnu/zconf.h "$DEPS/zlib/include/"
multiarch=/usr/lib/x86_64-linux-gnu
cp -L "$multiarch/libsqlite3.so.0" "$DEPS/sqlite/lib/"
ln -sf libsqlite3.so.0 "$DEPS/sqlite/lib/libsqlite3.so"
cp -L "$multiarch/libz.so.1" "$DEPS/zlib/lib/" 2>/dev/null || cp -L /lib/x86_64-linux-gnu/libz.so.1 "$DEPS/zlib/lib/"
ln -sf libz.so.1 "$DEPS/zlib/lib/libz.so"
du -sh "$DEPS"
