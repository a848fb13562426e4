"""The codec server: decrypts (and encrypts) payloads for the Temporal Web UI and CLI.

    TRAINING_CAMP_ENCRYPTION_KEY=... python codec_server.py --port 8888 --origin http://localhost:8233
    temporal workflow show -w lineage-essay-demo-A --codec-endpoint http://localhost:8888

Only those who can reach it see plain payloads; give it a token (--token) and the UI the same.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Annotated, Any

import typer
from temporalio.api.common.v1 import Payload

from encryption import EncryptionCodec, EncryptionError, codec_from_env


def _payloads(body: dict[str, Any]) -> list[Payload]:
    return [
        Payload(
            metadata={k: base64.b64decode(v) for k, v in p.get("metadata", {}).items()},
            data=base64.b64decode(p.get("data", "")),
        )
        for p in body.get("payloads", [])
    ]


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
    def __init__(self, codec: EncryptionCodec, origin: str | None, token: str | None) -> None:
        self.codec, self.origin, self.token = codec, origin, token
        self._server: asyncio.AbstractServer | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readline()).decode().split()
        headers: dict[str, str] = {}
        while line := (await reader.readline()).decode().strip():
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        method, path = [*request, "", ""][:2]
        status, payload = 404, {"error": "POST /encode or /decode"}
        if method == "OPTIONS":
            status, payload = 200, {}
        elif self.token and headers.get("authorization") != f"Bearer {self.token}":
            status, payload = 401, {"error": "missing or wrong bearer token"}
        elif method == "POST" and path in ("/encode", "/decode"):
            try:
                items = _payloads(json.loads(body or b"{}"))
                done = await (
                    self.codec.encode(items) if path == "/encode" else self.codec.decode(items)
                )
                status, payload = 200, _json(done)
            except (EncryptionError, ValueError) as exc:
                status, payload = 400, {"error": str(exc)}
        data = json.dumps(payload).encode()
        cors = (
            f"Access-Control-Allow-Origin: {self.origin}\r\n"
            "Access-Control-Allow-Methods: POST, OPTIONS\r\n"
            "Access-Control-Allow-Headers: Content-Type, Authorization, X-Namespace\r\n"
            "Access-Control-Allow-Credentials: true\r\n"
            if self.origin
            else ""
        )
        writer.write(
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n{cors}"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._handle, host, port)

    async def stop(self) -> None:
        if self._server:
            self._server.close()
            await self._server.wait_closed()


def main(
    port: Annotated[int, typer.Option()] = 8888,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    origin: Annotated[str | None, typer.Option(help="Web UI origin for CORS.")] = None,
    token: Annotated[str | None, typer.Option(help="Require this bearer token.")] = None,
) -> None:
    """Serve /encode and /decode with the key(s) from the environment."""
    codec = codec_from_env()
    if codec is None:
        raise typer.BadParameter("set TRAINING_CAMP_ENCRYPTION_KEY or _KEY_FILE")

    async def run() -> None:
        server = CodecServer(codec, origin, token)
        await server.start(host, port)
        typer.echo(f"codec server on http://{host}:{port} (key {codec.key_id})")
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    typer.run(main)
