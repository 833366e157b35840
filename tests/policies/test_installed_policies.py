"""A third-party policy package, built into a wheel and installed with pip, serves a role by
its entry-point name (`memsdk.serving.plugins`)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from memsdk import AsyncMemoryClient, InvalidInput, MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.serving.plugins import installed

from tests.policies.conftest import AsyncScripted, ScriptedBackend

PACKAGE = Path(__file__).resolve().parents[1] / "data" / "policy_package"
NAME, VERSION = "memsdk_policy_example", "0.1.0"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(out: Path) -> Path:
    """The package's wheel, written as a build backend writes one (a wheel is a zip of the
    files plus a dist-info folder), so the test needs no build backend installed."""
    import tomllib

    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["memsdk.policies"]
    info = f"{NAME}-{VERSION}.dist-info"
    files = {f"{NAME}/{p.name}": p.read_bytes() for p in (PACKAGE / NAME).glob("*.py")}
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {VERSION}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: memsdk-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/entry_points.txt"] = ("[memsdk.policies]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())).encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = out / f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return wheel


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the package was pip-installed into (kept off sys.path until a test adds it)."""
    root = tmp_path_factory.mktemp("site")
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", "-q", "--target", str(root / "lib"), str(wheel)], check=True)
    return root / "lib"


@pytest.fixture
def with_package(site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(site))
    yield site
    for module in [m for m in sys.modules if m.startswith(NAME)]:
        del sys.modules[module]


def test_installed_policies_are_listed_with_their_roles(with_package) -> None:
    found = {p.name: p for p in installed()}
    assert found["no-card-numbers"].role == "manager" and found["no-card-numbers"].distribution == "memsdk-policy-example"
    assert found["quoting-answerer"].role is None  # a factory: its role shows once it is built
    assert found["broken"].error is not None and "ModuleNotFoundError" in found["broken"].error


def test_memsdk_policies_installed_prints_them(with_package) -> None:
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(with_package), str(Path.cwd())])}
    out = subprocess.run([sys.executable, "-m", "memsdk.cli", "policies", "installed"], capture_output=True, text=True, env=env, check=True).stdout
    assert {p["name"] for p in json.loads(out)} >= {"no-card-numbers", "quoting-answerer", "broken"}


def test_an_installed_manager_serves_the_role_by_name(with_package, tmp_path) -> None:
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies={"extractor": "heuristic", "manager": "no-card-numbers", "answerer": "heuristic"}) as c:
        kept = c.ingest({"speaker": "ann", "text": "I moved to Lisbon in May"}, scope={"user_id": "ann"})
        dropped = c.ingest({"speaker": "ann", "text": "my card is 4111 1111 1111 1111 thanks"}, scope={"user_id": "ann"})
        assert len(kept.ops) == 1 and dropped.ops == [] and kept.policy_versions["manager"] == "no-card-numbers@0.1.0"
        assert c.history(scope={"user_id": "ann"}, memory_id=kept.ops[0].memory_id)[0].actor.version == "no-card-numbers@0.1.0"


async def test_an_installed_llm_answerer_serves_the_async_client(with_package, tmp_path) -> None:
    backend = AsyncScripted('It is "Lisbon".')
    async with AsyncMemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), backend=backend, policies={"extractor": "heuristic", "manager": "heuristic", "answerer": "quoting-answerer"}) as c:
        await c.ingest({"speaker": "ann", "text": "I moved to Lisbon in May"}, scope={"user_id": "ann"})
        answer = await c.answer("Where did ann move?", scope={"user_id": "ann"})
        assert answer.text == "Lisbon" and c.policies["answerer"].prompt == "custom: quoting-answerer@0.1.0"
        assert "Lisbon" in backend.requests[0]["messages"][-1]["content"]


def test_an_installed_policy_for_another_role_is_refused(with_package, tmp_path) -> None:
    with pytest.raises(InvalidInput, match="is a manager policy") as err:
        MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies={"answerer": "no-card-numbers"}, backend=ScriptedBackend())
    assert err.value.field == "config.policies.answerer"
    with pytest.raises(InvalidInput, match="could not be loaded"):
        MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies={"manager": "broken"}, backend=ScriptedBackend())
