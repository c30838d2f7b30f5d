#!/usr/bin/env python3
"""Run one prompt in a new session in this directory: python3 minimal_client.py "PROMPT"."""
import json, os, socket, sys

runtime = os.environ.get("XDG_RUNTIME_DIR")
sock = socket.socket(socket.AF_UNIX)
sock.connect(os.environ.get("AGENTD_SOCKET") or (f"{runtime}/agentd/agentd.sock" if runtime
             else f"{os.environ.get('TMPDIR') or '/tmp'}/agentd-{os.getuid()}/agentd.sock"))
lines = sock.makefile("r", encoding="utf-8")  # read-only: writes go straight to the socket
pending = []  # notifications that arrived while a call waited for its response

def call(method, params, last=[0]):
    last[0] += 1
    sock.sendall((json.dumps({"jsonrpc": "2.0", "id": last[0], "method": method,
                              "params": params}) + "\n").encode())
    while True:
        message = json.loads(lines.readline())
        if "method" in message:
            pending.append(message)
        elif message["id"] == last[0]:
            if "error" in message:
                sys.exit(f"{method}: {message['error']['message']}")
            return message["result"]

session = call("session/create", {"cwd": os.getcwd()})["session_id"]
call("session/subscribe", {"session_id": session, "since_seq": 0})
call("session/submit", {"session_id": session, "text": sys.argv[1]})
while True:
    item = (pending.pop(0) if pending else json.loads(lines.readline()))["params"]["result"]
    if item["type"] == "end":
        sys.exit(f"the stream ended: {item['reason']}")
    kind, data = item["kind"], item["data"]
    if kind == "assistant_text_delta":
        print(data["delta"], end="", flush=True)
    elif kind == "tool_call_start":
        print(f"[{data['tool_name']}] {json.dumps(data['arguments'])}", file=sys.stderr)
    elif kind == "processing_end":
        print()
        sys.exit(0 if data["reason"] == "completed" else 1)
