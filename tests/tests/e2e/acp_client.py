"""An ACP client on the official Python SDK (`agent-client-protocol` on PyPI) driving
`agentctl acp`: initialize, session/new, a prompt with an embedded file, session/list,
session/load, the mode and model config options, session/resume, session/close and
session/delete. Prints one JSON object with what it saw, for the Rust test (acp.rs) to check.

Usage: python acp_client.py AGENTCTL CWD
"""

import asyncio
import json
import os
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block, embedded_text_resource, resource_block
from acp.schema import ClientCapabilities, DeleteSessionRequest, Implementation


def shape(updates):
    """The update kinds, text chunks run together, usage (its count varies) and the commands
    offered (sent in their own time) left out."""
    kinds = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind not in ("usage_update", "available_commands_update") and not (kinds and kind == kinds[-1] and kind.endswith("_chunk")):
            kinds.append(kind)
    return kinds


def current(options):
    """Each config option's current value, by id."""
    return {o.id: o.current_value for o in options}


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
        replayed = client.updates
        client.updates = []
        options = {
            "created": current(session.config_options),
            "mode": current(
                (await conn.set_config_option(config_id="mode", session_id=session.session_id, value="read-only")).config_options
            ),
            "model": current(
                (
                    await conn.set_config_option(
                        config_id="model", session_id=session.session_id, value="anthropic/claude-from-python"
                    )
                ).config_options
            ),
        }
        resumed = await conn.resume_session(session_id=session.session_id, cwd=cwd)
        await conn.close_session(session_id=session.session_id)
        # This SDK release has the request's schema but no method for it yet.
        delete = DeleteSessionRequest(session_id=session.session_id)
        await conn._conn.send_request("session/delete", delete.model_dump(mode="json", by_alias=True, exclude_none=True))
        after_delete = await conn.list_sessions(cwd=cwd)
        caps = init.agent_capabilities.session_capabilities
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
                    "replayed": shape(replayed),
                    "usage": [
                        {"used": u["used"], "size": u["size"]} for u in live if u["sessionUpdate"] == "usage_update"
                    ][-1:],
                    "capabilities": sorted(k for k in ("list", "resume", "close", "delete") if getattr(caps, k) is not None),
                    "options": options,
                    "resumed_mode": current(resumed.config_options)["mode"],
                    # What came after the replay: the mode's update, and no replay on resume.
                    "after_load": sorted(
                        {u["sessionUpdate"] for u in client.updates} - {"available_commands_update"}
                    ),
                    "after_delete": [s.session_id for s in after_delete.sessions],
                }
            )
        )


asyncio.run(main(sys.argv[1], sys.argv[2]))
