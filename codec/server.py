"""The codec server: decrypts (and encrypts) payloads for the Temporal Web UI and CLI.

    TRAINING_CAMP_ENCRYPTION_KEY=... training-camp-codec --port 8888 --origin http://localhost:8233
    temporal workflow show -w lineage-essay-demo-A --codec-endpoint http://localhost:8888

Only those who can reach it see plain payloads; give it a token (--token) and the UI the same.
A Starlette app served by Hypercorn: the token is checked (in constant time) before a byte of
the body is read, bodies are capped in size and in the time they take to arrive (a dribbling
sender holds no slot), payloads are capped in number and parsed off the event loop, and idle or
slow connections are closed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
from typing import Annotated, Any

import typer
from hypercorn.asyncio import serve
from hypercorn.config import Config
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from temporalio.api.common.v1 import Payload

from codec.encryption import EncryptionCodec, EncryptionError, codec_from_env
from services.http_server import BackgroundServer

# The Web UI decodes a page of history at a time; Temporal caps one payload at 2 MB
MAX_BODY_BYTES = 16 * 1024 * 1024
IDLE_SECONDS = 5.0  # a connection with no request in flight is closed after this long
READ_SECONDS = 10.0  # each read of a request (a slow sender is cut off)
MAX_REQUESTS_IN_FLIGHT = 32  # beyond this, 503 rather than queueing memory
# A whole body must arrive within this: a sender dribbling a byte now and then, which each
# read's timeout never catches, is cut off (and holds no slot while it dribbles)
BODY_SECONDS = 15.0
MAX_PAYLOADS = 10_000  # a page of history holds far fewer; a million empty ones is an attack


class _Refused(Exception):
    def __init__(self, status: int, error: str) -> None:
        self.status, self.error = status, error


def _payloads(body: Any) -> list[Payload]:
    if not isinstance(body, dict) or not isinstance(body.get("payloads", []), list):
        raise ValueError('expected {"payloads": [...]}')
    if len(body.get("payloads", [])) > MAX_PAYLOADS:
        raise ValueError(f"more than {MAX_PAYLOADS:,} payloads in one request")
    try:
        return [
            Payload(
                metadata={
                    k: base64.b64decode(v, validate=True) for k, v in p.get("metadata", {}).items()
                },
                data=base64.b64decode(p.get("data", ""), validate=True),
            )
            for p in body.get("payloads", [])
        ]
    except (AttributeError, TypeError, binascii.Error) as exc:
        raise ValueError(f"a payload is not base64 metadata and data: {exc}") from None


def _parse(body: bytes) -> list[Payload]:
    return _payloads(json.loads(body or b"{}"))


def _json(payloads: list[Payload]) -> dict[str, Any]:
    return {
        "payloads": [
            {
                "metadata": {k: base64.b64encode(v).decode() for k, v in p.metadata.items()},
                "data": base64.b64encode(p.data).decode(),
            }
            for p in payloads
        ]
    }


class CodecServer:
    def __init__(
        self,
        codec: EncryptionCodec,
        origin: str | None,
        token: str | None,
        max_body_bytes: int = MAX_BODY_BYTES,
        body_seconds: float = BODY_SECONDS,
    ) -> None:
        self.codec = codec
        self.max_body_bytes = max_body_bytes
        self.body_seconds = body_seconds
        self._expected = f"Bearer {token}".encode() if token else None
        self._in_flight = asyncio.Semaphore(MAX_REQUESTS_IN_FLIGHT)
        self._server: BackgroundServer | None = None
        middleware = []
        if origin:
            middleware.append(
                Middleware(
                    CORSMiddleware,
                    allow_origins=[origin],
                    allow_methods=["POST", "OPTIONS"],
                    allow_headers=["Content-Type", "Authorization", "X-Namespace"],
                    allow_credentials=True,
                )
            )
        self.app = Starlette(
            routes=[
                Route("/encode", self._endpoint, methods=["POST"]),
                Route("/decode", self._endpoint, methods=["POST"]),
            ],
            middleware=middleware,
        )

    async def _endpoint(self, request: Request) -> JSONResponse:
        try:
            self._authorise(request)  # before the body: a stranger's upload is never read
            try:
                async with asyncio.timeout(self.body_seconds):
                    body = await self._body(request)
            except TimeoutError:
                raise _Refused(
                    408, f"the body did not arrive within {self.body_seconds:g} s"
                ) from None
            if self._in_flight.locked():
                raise _Refused(503, "busy: too many requests in flight")
            async with self._in_flight:
                # parsed off the event loop: a large body does not stall other requests
                items = await asyncio.to_thread(_parse, body)
                codec = self.codec
                done = await (
                    codec.encode(items) if request.url.path == "/encode" else codec.decode(items)
                )
        except _Refused as refused:
            return JSONResponse({"error": refused.error}, status_code=refused.status)
        except (EncryptionError, ValueError) as exc:  # JSON errors are ValueErrors too
            return JSONResponse({"error": str(exc)[:500]}, status_code=400)
        return JSONResponse(_json(done))

    def _authorise(self, request: Request) -> None:
        if self._expected is None:
            return
        sent = request.headers.get("authorization", "").encode("latin-1", "replace")
        if not hmac.compare_digest(sent, self._expected):
            raise _Refused(401, "missing or wrong bearer token")

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length", "0")
        if not declared.isdigit():  # h11 refuses these first; this holds behind other servers
            raise _Refused(400, "Content-Length is not a number")
        if int(declared) > self.max_body_bytes:
            raise _Refused(413, f"body over {self.max_body_bytes:,} bytes")
        body = bytearray()
        async for chunk in request.stream():  # chunked uploads declare no length
            body += chunk
            if len(body) > self.max_body_bytes:
                raise _Refused(413, f"body over {self.max_body_bytes:,} bytes")
        return bytes(body)

    def config(self, host: str, port: int) -> Config:
        config = Config()
        config.bind = [f"{host}:{port}"]
        config.keep_alive_timeout = IDLE_SECONDS
        config.read_timeout = READ_SECONDS  # type: ignore[assignment]
        config.accesslog = None
        return config

    async def start(self, host: str, port: int) -> None:
        """Serve in the background until ``stop``."""
        self._server = BackgroundServer(self.app, host, port, self.config(host, port))
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()


def main(
    port: Annotated[int, typer.Option()] = 8888,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    origin: Annotated[str | None, typer.Option(help="Web UI origin for CORS.")] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require this bearer token (from the environment, it stays out of `ps`).",
            envvar="TRAINING_CAMP_CODEC_TOKEN",
        ),
    ] = None,
    max_body: Annotated[int, typer.Option(help="Largest request body, bytes.")] = MAX_BODY_BYTES,
) -> None:
    """Serve /encode and /decode with the key(s) from the environment."""
    codec = codec_from_env()
    if codec is None:
        raise typer.BadParameter("set TRAINING_CAMP_ENCRYPTION_KEY or _KEY_FILE")

    async def run() -> None:
        server = CodecServer(codec, origin, token, max_body)
        typer.echo(f"codec server on http://{host}:{port} (key {codec.key_id})")
        await serve(server.app, server.config(host, port))  # type: ignore[arg-type]

    asyncio.run(run())


def cli() -> None:
    typer.run(main)


if __name__ == "__main__":
    cli()
