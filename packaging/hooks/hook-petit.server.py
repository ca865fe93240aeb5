"""PyInstaller hook for `petit.server` (`petit serve`): Starlette and uvicorn are imported inside functions, and
uvicorn names its protocol and event-loop implementations by strings (pyinstaller-hooks-contrib's uvicorn hook
collects those); anyio picks its asyncio backend by name; llguidance (constrained decoding: response_format, forced
tool calls) is imported on first use."""
hiddenimports = ["uvicorn", "uvicorn.protocols.http.h11_impl", "uvicorn.lifespan.off", "uvicorn.loops.asyncio",
                 "starlette.applications", "starlette.routing", "starlette.responses", "anyio._backends._asyncio",
                 "h11", "llguidance", "llguidance._lib"]
