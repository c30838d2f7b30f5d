"""A Streamable HTTP MCP server for agentd's tests (tests/tests/e2e/mcp.rs), on the official
`mcp` Python SDK, which serves both the 2025-11-25 handshake and the 2026-07-28 stateless
protocol. Usage: http_server.py PORT. With AGENTD_TEST_EXPECT_TOKEN and AGENTD_TEST_EXPECT_TEAM
set, it answers only requests carrying `Authorization: Bearer <token>` and `X-Team: <team>`
(401 otherwise), so a call that succeeds proves both arrived; nothing it answers holds them."""

import os
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("http-test")


@server.tool()
def protocol(ctx: Context) -> str:
    """The protocol version this call came by."""
    return f"protocol {ctx.protocol_version}"


class Guard:
    """Refuses every HTTP request without the expected credentials."""

    def __init__(self, app, token, team):
        self.app = app
        self.expected = (f"Bearer {token}".encode(), team.encode())

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            seen = (headers.get(b"authorization"), headers.get(b"x-team"))
            if seen != self.expected:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"missing or wrong credentials"})
                return
        await self.app(scope, receive, send)


app = server.streamable_http_app()
token = os.environ.get("AGENTD_TEST_EXPECT_TOKEN")
if token is not None:
    app = Guard(app, token, os.environ["AGENTD_TEST_EXPECT_TEAM"])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
