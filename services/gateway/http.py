"""Running the ASGI app with uvicorn inside the service's own event loop, as a background task."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the service runner (one shutdown path: its stop event)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket; port 0 picks a free one (read it with ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def socket_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def serve_app(app: FastAPI, sock: socket.socket, stop: asyncio.Event) -> None:
    """Serve ``app`` on ``sock`` until ``stop`` is set, then finish open requests and close."""
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False, server_header=False)
    server = EmbeddedServer(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]), name="gateway:http")
    waiting = asyncio.create_task(stop.wait(), name="gateway:http-stop")
    try:
        await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        server.should_exit = True
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await serving
        sock.close()
