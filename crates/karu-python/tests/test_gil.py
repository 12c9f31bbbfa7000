"""Every call that waits on I/O releases the GIL: a second Python thread keeps running while
a slow read waits on the test kit's trickle route (or a delayed answer, for probes)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
from conftest import content

import karu

SIZE = 3000
# 3000 bytes at 2000 bytes/s: about 1.5 s of body.
TRICKLE = "trickle/gil.bin?size=3000&rate=2000"
# Probes read a byte or two: the answer itself is held back instead.
DELAYED = "ok/gil-delayed.bin?size=3000&delay_ms=1500"


async def awaited(f: Callable[..., Any], *args: Any) -> Any:
    return await f(*args)


def calls(base: str, tmp: Path) -> Dict[str, Callable[[karu.Client], Any]]:
    slow, delayed = f"{base}/{TRICKLE}", f"{base}/{DELAYED}"
    return {
        "read": lambda c: c.read(slow, 0, SIZE),
        "read_ranges": lambda c: c.read_ranges(slow, [(0, 1000), (2000, 1000)]),
        "read_into": lambda c: c.read_into(slow, 0, bytearray(SIZE)),
        "stat": lambda c: c.stat(delayed),
        "size": lambda c: c.size(delayed),
        "read_ends": lambda c: c.read_ends(delayed, 10, 10),
        "submit": lambda c: list(c.submit([(slow, 0, SIZE)])),
        "download": lambda c: c.download(slow, tmp / "gil.bin", overwrite=True),
        "open": lambda c: karu.open(delayed, client=c).read(),
        "read_async": lambda c: asyncio.run(awaited(c.read_async, slow, 0, SIZE)),
    }


@pytest.mark.parametrize(
    "name",
    ["read", "read_ranges", "read_into", "stat", "size", "read_ends", "submit", "download",
     "open", "read_async"],
)
def test_a_second_thread_runs_during_a_slow_call(testkit: str, tmp_path: Path, name: str) -> None:
    client = karu.Client(hermetic=True)
    call = calls(testkit, tmp_path)[name]
    result: Dict[str, Any] = {}

    def run() -> None:
        t0 = time.monotonic()
        try:
            result["value"] = call(client)
        except BaseException as e:  # reported below
            result["error"] = e
        result["seconds"] = time.monotonic() - t0

    worker = threading.Thread(target=run)
    ticks = 0
    worker.start()
    while worker.is_alive():
        # Pure Python work: it needs the GIL for every bytecode.
        sum(range(200))
        ticks += 1
        time.sleep(0.005)
    worker.join()
    assert "error" not in result, result.get("error")
    assert result["seconds"] > 1.0, "the call was not slow: the test proves nothing"
    # ~200 ticks per second while the call waits; a held GIL allows a handful at most.
    assert ticks > 50 * result["seconds"], (ticks, result["seconds"])
    if name == "read":
        assert result["value"] == content("gil.bin", 0, SIZE)
