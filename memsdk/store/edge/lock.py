"""The data directory's LOCK: one process, so one client, per directory."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memsdk.errors import StoreLocked

__all__ = ["DirLock"]


class DirLock:
    """An exclusive flock on ROOT/LOCK, held for the life of the transport."""

    def __init__(self, root: Path) -> None:
        self.path = root / "LOCK"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            raise StoreLocked(
                f"the data directory {root} is already open (held by pid {holder}). "
                "The embedded store allows one client per directory: close the other client, "
                "use another data_dir, or point every process at a Qdrant server (qdrant_url=...)."
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
