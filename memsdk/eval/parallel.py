"""Threads for the harness's LLM requests: against a server they overlap, in-process they queue."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tqdm import tqdm

__all__ = ["ordered_map"]

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(fn: Callable[[T], R], items: Sequence[T], *, workers: int, bar: tqdm[Any] | None = None) -> list[R]:
    """``fn`` over ``items`` with up to ``workers`` calls in flight, results in input order.
    The first exception is raised once the calls in flight have returned; queued ones are
    dropped, since against a dead server each would only wait out its own retries."""
    out = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fn, item) for item in items]
        try:
            for future in futures:
                out.append(future.result())
                if bar is not None:
                    bar.update()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return out
