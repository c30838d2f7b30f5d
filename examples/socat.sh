#!/usr/bin/env bash
# Talk to agentd from the shell: one JSON-RPC request per line in, one response per line out.
# Needs socat (apt-get install socat, brew install socat).
#
#   examples/socat.sh              daemon info and the session list
#   examples/socat.sh SESSION      that session's events from the start (streams until it ends)
set -euo pipefail
# The socket path the binaries use: $AGENTD_SOCKET, else $XDG_RUNTIME_DIR/agentd/agentd.sock,
# else $TMPDIR/agentd-$UID/agentd.sock.
if [ -n "${AGENTD_SOCKET:-}" ]; then
  sock=$AGENTD_SOCKET
elif [ -n "${XDG_RUNTIME_DIR:-}" ]; then
  sock=$XDG_RUNTIME_DIR/agentd/agentd.sock
else
  sock=${TMPDIR:-/tmp}/agentd-$(id -u)/agentd.sock
fi

if [ $# -eq 0 ]; then
  printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"daemon/info"}' \
    '{"jsonrpc":"2.0","id":2,"method":"session/list"}' |
    socat -t 5 - "UNIX-CONNECT:$sock"
else
  # socat half-closes after sending; the daemon keeps streaming until the subscription ends.
  printf '{"jsonrpc":"2.0","id":1,"method":"session/subscribe","params":{"session_id":"%s","since_seq":0}}\n' "$1" |
    socat -t 3600 - "UNIX-CONNECT:$sock"
fi
