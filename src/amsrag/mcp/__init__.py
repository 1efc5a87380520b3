"""`amsrag serve --mcp`: the index as Model Context Protocol tools (search, ask, get_passage) over stdio or streamable
HTTP, on the official `mcp` SDK (`pip install 'amsrag[mcp]'`; docs/mcp.md)."""
