"""A small program using karu's public API; `mypy --strict` must accept it (test_types.py)."""

from __future__ import annotations

import asyncio
from typing import List, Optional

import karu
from karu.fsspec import KaruFileSystem, register


def blocking(uri: str) -> int:
    client = karu.Client({"KARU_MAX_ATTEMPTS": 3, "AWS_NO_SIGN_REQUEST": True}, hermetic=True)
    head: bytes = client.read(uri, 0, 16)
    parts: List[bytes] = client.read_ranges(uri, [(0, 4), (100, 8)])
    buf = bytearray(64)
    n: int = client.read_into(uri, 0, buf)
    info = client.stat(uri)
    etag: Optional[str] = info.etag
    ends = client.read_ends(uri, 8, 8)
    total = len(head) + sum(map(len, parts)) + n + info.size + len(ends.tail)
    for done in client.submit([(uri, 0, 4), (uri, 4, 4, 99)]):
        if done.status != karu.Status.OK and done.error is not None:
            raise done.error
        total += done.tag + len(done.data)
    result = client.download(
        uri, "/tmp/out.bin", chunk_size=1 << 20, parallelism=4, overwrite=True,
        progress=lambda done, size: None,
    )
    total += result.size + (len(etag) if etag else 0)
    with karu.open(uri, block_size=1 << 16) as f:
        f.seek(0)
        total += len(f.read(10)) + f.readinto(bytearray(10)) + f.size
    return total


async def concurrent(client: karu.Client, uris: List[str]) -> List[bytes]:
    one: bytes = await client.read_async(uris[0], 0, 1)
    rest = await asyncio.gather(*(client.read_async(u, 0, 8) for u in uris))
    info = await client.stat_async(uris[0])
    async for done in client.submit([(u, 0, 1) for u in uris]):
        rest.append(done.data)
    return [one, *rest, str(info.size).encode()]


def errors(client: karu.Client, uri: str) -> str:
    try:
        client.read(uri, 0, 1)
    except karu.NotFoundError as e:
        return f"missing ({e.status.name}): {e.message}"
    except FileNotFoundError:
        return "also caught as a builtin"
    except karu.Error as e:
        return str(int(e.status))
    return "ok"


def filesystem(uri: str) -> int:
    register("s3", "https")
    fs = KaruFileSystem(options={"AWS_REGION": "us-east-1"})
    return len(fs.cat_file(uri, 0, 10))
