#!/usr/bin/env bash
# Installs what is missing (apt), builds the desktop app and starts it.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_dependencies
build -DCLUSTERSCOPE_GUI=ON
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
  cat <<MSG
ClusterScope is built, but there is no display to show it on (DISPLAY is not set).
  - On a desktop session, run this command from a terminal inside it.
  - Over SSH, connect with 'ssh -X' (X forwarding) and run it again,
    or run it inside a remote desktop (VNC) session.
  - The command-line tool needs no display: $BUILD_DIR/bin/clusterscope --help
MSG
  exit 1
fi
exec "$BUILD_DIR/bin/clusterscope-ui" "$@"
