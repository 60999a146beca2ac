"""Drives `contextq-memory mcp --http` with the official Python MCP client (`pip install mcp`)
over streamable HTTP with a ContextQ key: the six memory commands in WORKSPACE, the resources,
and one write outside WORKSPACE; prints one JSON line of what each returned.

Usage: python remote.py URL KEY WORKSPACE OTHER_WORKSPACE PREFIX   (PREFIX starts its file names)
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, key: str, ws: str, other: str, p: str) -> None:
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                base = f"/memories/{ws}"
                steps = [
                    {"command": "create", "path": f"{base}/{p}notes.md", "file_text": "Prefers Rust\n"},
                    {"command": "str_replace", "path": f"{base}/{p}notes.md", "old_str": "Rust", "new_str": "Rust and tests"},
                    {"command": "insert", "path": f"{base}/{p}notes.md", "insert_line": 0, "insert_text": "# Notes"},
                    {"command": "view", "path": f"{base}/{p}notes.md"},
                    {"command": "rename", "old_path": f"{base}/{p}notes.md", "new_path": f"{base}/{p}kept.md"},
                    {"command": "create", "path": f"{base}/{p}gone.md", "file_text": "x\n"},
                    {"command": "delete", "path": f"{base}/{p}gone.md"},
                    {"command": "view", "path": base},
                    {"command": "create", "path": f"/memories/{other}/x.md", "file_text": "not mine\n"},
                ]
                results = []
                for step in steps:
                    r = await session.call_tool("memory", step)
                    results.append({"text": r.content[0].text, "is_error": bool(r.is_error)})
                listed = await session.list_resources()
                uris = [str(r.uri) for r in listed.resources]
                read_back = await session.read_resource(f"memory://{base}/{p}kept.md")
                print(
                    json.dumps(
                        {
                            "client": "python",
                            "results": results,
                            "resources": uris,
                            "read": read_back.contents[0].text,
                        }
                    )
                )


asyncio.run(main(*sys.argv[1:6]))
