"""MCP tools in the chat: the servers of mcp.json (config, client, service), the model's side of a call (formats),
the tool-use loop (loop, turns, widgets), and the Tools tab (panel)."""
