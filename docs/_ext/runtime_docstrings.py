"""A griffe extension for the API page: methods whose docstring is given at import time.

memsdk's async and remote clients take each call's docstring from the client they mirror
when they are imported (`memsdk.client._base.documented_as`), so one text documents all of
them and they cannot drift apart. mkdocstrings reads the source, where those methods have
none; this fills them in from the imported classes, the same text `help()` shows.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe

#: the classes documented that way, by import path
MIRRORS = ("memsdk.client.aio.AsyncMemoryClient", "memsdk.client.remote.RemoteMemoryClient", "memsdk.client.remote.AsyncRemoteMemoryClient")


class RuntimeDocstrings(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "memsdk":
            return
        for path in MIRRORS:
            module, name = path.rsplit(".", 1)
            runtime = getattr(importlib.import_module(module), name)
            for member_name, member in pkg[path.removeprefix("memsdk.")].members.items():
                found = inspect.getattr_static(runtime, member_name, None)
                found = found.fget if isinstance(found, property) else found
                if member.docstring is None and (doc := getattr(found, "__doc__", None)):
                    member.docstring = griffe.Docstring(inspect.cleandoc(doc), parent=member)
