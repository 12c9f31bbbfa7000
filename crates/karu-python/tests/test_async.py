"""The asyncio twins give what their blocking originals give, and run concurrently."""

from __future__ import annotations

import asyncio
import time
from typing import List

import numpy as np
import pytest
from conftest import NGINX_FILES, Moto, Nginx, content

import karu


def test_async_twins_against_nginx_and_moto(nginx: Nginx, moto: Moto) -> None:
    cases = [(karu.Client(hermetic=True), f"{nginx.url}/{n}", n, s) for n, s in NGINX_FILES.items()]
    mc = moto.client()
    cases += [(mc, moto.uri(n), n, s) for n, s in NGINX_FILES.items()]

    async def main() -> None:
        for client, uri, name, size in cases:
            assert await client.read_async(uri, 3, 100) == content(name, 3, 100)
            ranges = [(0, 10), (size - 10, 10), (size // 2, 33)]
            got = await client.read_ranges_async(uri, ranges)
            assert got == [content(name, o, n) for o, n in ranges]
            buf = np.zeros(64, dtype=np.uint8)
            assert await client.read_into_async(uri, 7, buf) == 64
            assert buf.tobytes() == content(name, 7, 64)
            info = await client.stat_async(uri)
            assert info.size == size and info.etag
            assert await client.size_async(uri) == size
            ends = await client.read_ends_async(uri, 5, 6)
            assert (ends.head, ends.tail) == (content(name, 0, 5), content(name, size - 6, 6))
            seen = {}
            async for tag, status, data in client.submit([(uri, 0, 8), (uri, 8, 8)]):
                seen[tag] = (status, data)
            assert seen == {
                0: (karu.Status.OK, content(name, 0, 8)),
                1: (karu.Status.OK, content(name, 8, 8)),
            }
            with pytest.raises(karu.NotFoundError):
                await client.read_async(uri + ".missing", 0, 1)

    asyncio.run(main())


def test_async_reads_overlap(testkit: str) -> None:
    client = karu.Client(hermetic=True)
    uris = [f"{testkit}/ok/async-{i}.bin?size=100&delay_ms=500" for i in range(8)]

    async def main() -> List[bytes]:
        return await asyncio.gather(*(client.read_async(u, 0, 100) for u in uris))

    t0 = time.monotonic()
    got = asyncio.run(main())
    elapsed = time.monotonic() - t0
    assert got == [content(f"async-{i}.bin", 0, 100) for i in range(8)]
    assert elapsed < 2.5, f"8 reads of 0.5 s each took {elapsed:.2f} s: not concurrent"


def test_cancelling_an_async_read_into_leaves_the_buffer_alone(testkit: str) -> None:
    client = karu.Client(hermetic=True)
    buf = bytearray(3000)

    async def main() -> None:
        task = asyncio.ensure_future(
            client.read_into_async(f"{testkit}/trickle/cancel.bin?size=3000&rate=2000", 0, buf)
        )
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    # The buffer may be resized again: karu let go of it.
    time.sleep(0.2)
    buf.extend(b"x")
    assert len(buf) == 3001
