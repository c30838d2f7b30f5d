#!/usr/bin/env python3
"""Drive agentd from Python with nothing but the standard library.

    python3 examples/python_client.py "Summarize this repository" [WORKING_DIR]

Creates a session, subscribes to its events from the start, submits the prompt, prints the
assistant's text as it streams (tool calls go to stderr), and exits when the work ends: 0 when
it completed, 1 otherwise.
"""
import json
import os
import socket
import sys


def socket_path():
    """The path the binaries use: $AGENTD_SOCKET, else $XDG_RUNTIME_DIR/agentd/agentd.sock,
    else $TMPDIR/agentd-$UID/agentd.sock."""
    if os.environ.get("AGENTD_SOCKET"):
        return os.environ["AGENTD_SOCKET"]
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "agentd", "agentd.sock")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"agentd-{os.getuid()}", "agentd.sock")


class Client:
    """Newline-delimited JSON-RPC over the Unix socket; notifications are kept until read.

    Reads go through a read-only file and writes straight to the socket: a single
    makefile("rw") would drop whatever it had buffered for reading at every write, losing
    notifications that arrived while a call was sent (a steer while reading events, say)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.reader = self.sock.makefile("r", encoding="utf-8", newline="\n")
        self.next_id = 0
        self.notifications = []

    def read(self):
        line = self.reader.readline()
        if not line:
            raise ConnectionError("agentd closed the connection")
        return json.loads(line)

    def call(self, method, params):
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.sock.sendall((json.dumps(request) + "\n").encode("utf-8"))
        while True:
            message = self.read()
            if "method" in message:
                self.notifications.append(message)
            elif message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']['message']}")
                return message["result"]

    def items(self):
        """Yields subscription items (events, then a final {"type": "end"})."""
        while True:
            message = self.notifications.pop(0) if self.notifications else self.read()
            if message.get("method") == "session/event":
                yield message["params"]["result"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    prompt = sys.argv[1]
    cwd = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.getcwd())
    client = Client(socket_path())
    session = client.call("session/create", {"cwd": cwd})["session_id"]
    client.call("session/subscribe", {"session_id": session, "since_seq": 0})
    client.call("session/submit", {"session_id": session, "text": prompt})
    for item in client.items():
        if item["type"] == "end":
            return 1
        kind, data = item["kind"], item["data"]
        if kind == "assistant_text_delta":
            print(data["delta"], end="", flush=True)
        elif kind == "assistant_text_end" and data["text"]:
            print()
        elif kind == "tool_call_start":
            print(f"[{data['tool_name']}] {json.dumps(data['arguments'])}", file=sys.stderr)
        elif kind in ("warning", "error"):
            print(f"{kind}: {data['message']}", file=sys.stderr)
        elif kind == "processing_end":
            return 0 if data["reason"] == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
