"""An ACP client on the official Python SDK (`agent-client-protocol` on PyPI) driving
`agentctl acp`: initialize, session/new, a prompt with an embedded file, session/list and
session/load. Prints one JSON object with what it saw, for the Rust test (acp.rs) to check.

Usage: python acp_client.py AGENTCTL CWD
"""

import asyncio
import json
import os
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block, embedded_text_resource, resource_block
from acp.schema import ClientCapabilities, Implementation


def shape(updates):
    """The update kinds, text chunks run together, usage left out (its count varies)."""
    kinds = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind != "usage_update" and not (kinds and kind == kinds[-1] and kind.endswith("_chunk")):
            kinds.append(kind)
    return kinds


class Recorder:
    def __init__(self):
        self.updates = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        raise RuntimeError("no permission is asked in this scenario")


async def main(agentctl, cwd):
    client = Recorder()
    # The SDK passes a trimmed environment by default; the daemon's socket must get through
    # (as an editor's `env` setting would pass it).
    async with spawn_agent_process(client, agentctl, "acp", env=dict(os.environ)) as (conn, _proc):
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="python-sdk-check", version="1"),
        )
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        file = embedded_text_resource(f"file://{cwd}/notes.txt", "remember this line")
        answer = await conn.prompt(
            session_id=session.session_id,
            prompt=[text_block("read it"), resource_block(file)],
        )
        live = client.updates
        client.updates = []
        listed = await conn.list_sessions(cwd=cwd)
        await conn.load_session(cwd=cwd, session_id=session.session_id)
        print(
            json.dumps(
                {
                    "protocol_version": init.protocol_version,
                    "load_session": init.agent_capabilities.load_session,
                    "stop_reason": answer.stop_reason,
                    "live": shape(live),
                    "live_text": "".join(
                        u["content"]["text"] for u in live if u["sessionUpdate"] == "agent_message_chunk"
                    ),
                    "listed": [s.session_id for s in listed.sessions],
                    "session": session.session_id,
                    "replayed": shape(client.updates),
                }
            )
        )


asyncio.run(main(sys.argv[1], sys.argv[2]))
