"""A griffe extension for the API page: methods whose docstring is given at import time.

memsdk's async and remote clients take each call's docstring from the client they mirror,
and the transports and embedders from their protocols, when they are imported
(`memsdk.docstrings.documented_as`), so one text documents all of them and they cannot
drift apart. mkdocstrings reads the source, where those methods have none; this fills them
in from the imported classes, the same text `help()` shows.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe

#: beside `memsdk.__all__`, the classes documented that way that the API page shows
EXTRA = ("memsdk.client.remote.RemoteMemoryClient", "memsdk.client.remote.AsyncRemoteMemoryClient")


def _classes() -> list[tuple[str, type]]:
    """(griffe path, class) of every class the API page may show: `memsdk.__all__`'s, where
    they are defined, and `EXTRA`."""
    import memsdk

    found = [(f"{c.__module__}.{c.__qualname__}", c) for name in memsdk.__all__ if inspect.isclass(c := getattr(memsdk, name)) and c.__module__.startswith("memsdk")]
    for path in EXTRA:
        module, name = path.rsplit(".", 1)
        found.append((path, getattr(importlib.import_module(module), name)))
    return found


class RuntimeDocstrings(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "memsdk":
            return
        for path, runtime in _classes():
            try:
                cls = pkg[path.removeprefix("memsdk.")]
            except KeyError:
                continue  # not where griffe reads it (defined dynamically): nothing to fill
            for member_name, member in cls.members.items():
                found = inspect.getattr_static(runtime, member_name, None)
                found = found.fget if isinstance(found, property) else found
                if member.docstring is None and (doc := getattr(found, "__doc__", None)):
                    member.docstring = griffe.Docstring(inspect.cleandoc(doc), parent=member)
