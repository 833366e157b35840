"""The data directory's LOCK: one process, so one client, per directory."""

from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock, Timeout

from memsdk.errors import StoreLocked

__all__ = ["DirLock"]


class DirLock:
    """An exclusive lock on ROOT/LOCK (flock, or LockFileEx on Windows), held for the life of
    the transport; the file names the holder's pid for the refusal another process gets."""

    def __init__(self, root: Path) -> None:
        self.path = root / "LOCK"
        # not thread-local: a client may be closed on another thread than the one that opened
        # it. No soft fallback where a filesystem lacks flock: its marker file outlives a
        # kill -9, and the store must reopen after one
        self._lock = FileLock(self.path, thread_local=False, fallback_to_soft=False, on_acquired=_write_pid)
        try:
            self._lock.acquire(blocking=False)
        except Timeout:
            raise StoreLocked(
                f"the data directory {root} is already open (held by pid {_holder(self.path)}). "
                "The embedded store allows one client per directory: close the other client, "
                "use another data_dir, or point every process at a Qdrant server (qdrant_url=...)."
            ) from None

    def release(self) -> None:
        self._lock.release()


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())


def _holder(path: Path) -> str:
    try:
        with path.open("rb") as f:
            return f.read(64).decode(errors="replace").strip() or "unknown"
    except OSError:  # Windows refuses reads of the byte the holder has locked
        return "unknown"
