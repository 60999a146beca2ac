"""Walks every page of `resources/list` of `contextq-memory mcp` with the official Python MCP
client (`pip install mcp`), then views /memories with the memory tool; prints one JSON line.

Usage: python walk.py BIN STORE   (STORE: a --store value, e.g. local:/tmp/dir)
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def main(binary: str, store: str) -> None:
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--store", store],
        env={"CONTEXT_API_URL": "", "CONTEXT_API_KEY": ""},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            uris, pages, cursor = [], 0, None
            started, first_page = time.perf_counter(), None
            while True:
                page = await session.list_resources(
                    params=types.PaginatedRequestParams(cursor=cursor)
                )
                pages += 1
                if first_page is None:
                    first_page = time.perf_counter() - started
                uris.extend(str(r.uri) for r in page.resources)
                cursor = page.next_cursor
                if cursor is None:
                    break
            walk = time.perf_counter() - started
            view = await session.call_tool("memory", {"command": "view", "path": "/memories"})
            text = view.content[0].text
            print(
                json.dumps(
                    {
                        "client": "python",
                        "pages": pages,
                        "first_page_ms": round(first_page * 1000, 1),
                        "walk_s": round(walk, 3),
                        "resources": len(uris),
                        "unique": len(set(uris)),
                        "sorted": uris == sorted(uris),
                        "first": uris[0] if uris else None,
                        "last": uris[-1] if uris else None,
                        "view_chars": len(text),
                        "view_last_line": text.splitlines()[-1],
                        "view_is_error": bool(view.is_error),
                    }
                )
            )


asyncio.run(main(sys.argv[1], sys.argv[2]))
