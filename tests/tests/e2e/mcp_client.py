"""A driver for `agentctl mcp-server` on the official MCP Python SDK (`mcp` on PyPI): its
`Client` starts the server over stdio, and the Rust test (mcp_server.rs) steers it with one
JSON command per line on stdin; each answer is one JSON line on stdout.

Commands:
  {"op": "info"}                          -> {"protocol_version", "server_name", "instructions"}
  {"op": "tools"}                         -> {"tools": [...]}, as the SDK parsed them
  {"op": "call", "id", "name", "arguments", "progress": bool}
                                          -> later {"id", "result", "progress": [messages]}
                                             (or {"id", "exception"})
  {"op": "cancel", "id"}                  -> abandons that call (the SDK then sends
                                             notifications/cancelled); answers {"id",
                                             "cancelled": true} once it is gone
Calls run concurrently; the driver ends when stdin closes.

Usage: python mcp_client.py MODE AGENTCTL   (MODE: legacy or auto, the SDK's handshake)
"""

import json
import os
import sys

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


def emit(value):
    print(json.dumps(value), flush=True)


async def run_call(client, command, scopes):
    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    call_id = command["id"]
    with anyio.CancelScope() as scope:
        scopes[call_id] = scope
        try:
            result = await client.call_tool(
                command["name"],
                command.get("arguments"),
                progress_callback=on_progress if command.get("progress") else None,
            )
            emit({"id": call_id, "result": result.model_dump(mode="json", by_alias=True, exclude_none=True), "progress": progress})
        except Exception as e:  # an MCP error answer: the test decides
            emit({"id": call_id, "exception": f"{type(e).__name__}: {e}"})
    if scope.cancelled_caught:
        emit({"id": call_id, "cancelled": True})


async def main(mode, agentctl):
    # The SDK passes a trimmed environment by default; the daemon's socket must get through
    # (as an MCP client's `env` setting would pass it).
    server = StdioServerParameters(command=agentctl, args=["mcp-server"], env=dict(os.environ))
    async with Client(server, mode=mode) as client:
        scopes = {}
        async with anyio.create_task_group() as tasks:
            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    break
                command = json.loads(line)
                op = command["op"]
                if op == "info":
                    info = client.session.server_info
                    emit({
                        "protocol_version": client.protocol_version,
                        "server_name": info.name if info else None,
                        "instructions": client.session.instructions,
                    })
                elif op == "tools":
                    listed = await client.list_tools()
                    emit({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]})
                elif op == "call":
                    tasks.start_soon(run_call, client, command, scopes)
                elif op == "cancel":
                    scopes[command["id"]].cancel()
                else:
                    raise ValueError(f"unknown op {op}")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
