#!/usr/bin/env bash
# Installs what is missing (apt), builds everything and runs the whole test suite.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_dependencies
build -DCLUSTERSCOPE_GUI=ON -DCLUSTERSCOPE_TESTS=ON
echo "== running the tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" "$@"
