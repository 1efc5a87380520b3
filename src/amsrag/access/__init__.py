"""What both front doors of an index check before a request reaches the engine (issue 41): the HTTP service
(`amsrag.serve`) and the MCP server (`amsrag.mcp`) stand on it, and it imports neither. `errors.py`: the API
error and the body every failure answers with; `limits.py`: API keys, the Host names served, the body size;
`settings.py`: the [serve] section a front door runs with ($AMSRAG_API_KEYS, no keys only on loopback)."""
