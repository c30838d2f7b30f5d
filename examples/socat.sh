#!/usr/bin/env bash
# Talk to agentd from the shell: one JSON-RPC request per line in, one response per line out.
#
#   examples/socat.sh              daemon info and the session list
#   examples/socat.sh SESSION      that session's events from the start (streams until it ends)
set -euo pipefail
sock=${AGENTD_SOCKET:-${XDG_RUNTIME_DIR:-/tmp/agentd-$(id -u)}/agentd/agentd.sock}

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
