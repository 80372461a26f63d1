"""asyncio streams over the process's own stdin/stdout (pipes from the shim)."""

from __future__ import annotations

import asyncio
import os
import sys


class _PipeReader:
    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def read(self, n: int) -> bytes:
        return await self._reader.read(n)


async def open_stdio() -> tuple[_PipeReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**16)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    # Duplicate stdout for the protocol and point fd 1 at stderr, so a stray print() from any
    # library can never corrupt the protocol stream.
    proto_fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    out = os.fdopen(proto_fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return _PipeReader(reader), writer
