"""Switching policy versions on a running client, with a scripted backend (fast, exact)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from memsdk import InvalidInput, PolicyError
from memsdk.llm.base import Choice, Completion
from memsdk.policies import load_prompt
from memsdk.registry import PolicyManifest, PolicyRegistry

from .conftest import CAROLINE


class AdapterBackend:
    """Answers every request with the name of the model it was routed to, so a test can see
    which version served it; `gate` lets a test hold a request in flight."""

    supports_schema = False

    def __init__(self) -> None:
        self.model = "smollm2"
        self.loaded: dict[str, str] = {}
        self.fail_loads = False
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()

    def chat(self, messages, *, params, model=None, schema=None) -> Completion:
        self.started.set()
        self.gate.wait(10)
        name = model or self.model
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        body = '{"evidence": [0], "answer": "' + name + '"}'
        text = body[len(prefix):] if body.startswith(prefix) else body
        return Completion(model=name, choices=[Choice(text=text)], prompt_tokens=10, completion_tokens=5)

    def load_lora_adapter(self, name: str, path: str, *, replace: bool = False) -> None:
        if self.fail_loads:
            raise RuntimeError("server said 500: adapter is corrupt")
        self.loaded[name] = path

    def close(self) -> None:
        pass


class RecordingBackend(AdapterBackend):
    """Replies in the extractor's or the manager's format (told apart by the response prefix)
    and records (system prompt, model) of every request."""

    REPLIES = {'{"facts": ["': '{"facts": ["Caroline adopted a dog named Buddy"]}', '{"ops": [{"op": "': '{"ops": [{"op": "NOOP"}]}'}

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str | None]] = []

    def chat(self, messages, *, params, model=None, schema=None) -> Completion:
        self.seen.append((messages[0]["content"], model))
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        return Completion(model=model or self.model, choices=[Choice(text=self.REPLIES[prefix][len(prefix) :])], prompt_tokens=10, completion_tokens=5)


def async_twin(cls: type[AdapterBackend]) -> type:
    """A scripted backend as an async one: the same replies and loads, awaited."""

    class Async(cls):  # type: ignore[misc, valid-type]
        async def chat(self, *a, **kw):  # type: ignore[override]
            return cls.chat(self, *a, **kw)

        async def load_lora_adapter(self, *a, **kw):  # type: ignore[override]
            return cls.load_lora_adapter(self, *a, **kw)

        async def aclose(self) -> None:
            pass

    return Async


def publish(root: Path, role: str, version: str, *, promote: bool = False, prompt: str | None = None, config: dict | None = None, serve_answer_k: int | None = None) -> None:
    adapter = root.parent / f"adapter-{role}-{version}"
    adapter.mkdir(parents=True, exist_ok=True)
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 8}))
    manifest = PolicyManifest(role=role, version=version, base_model="smollm2", promote=promote, prompt=prompt, config=config or {}, serve_answer_k=serve_answer_k)
    PolicyRegistry(root).publish(adapter, manifest)


@pytest.fixture
def swap(make_client, tmp_path):
    backend = AdapterBackend()
    client = make_client(backend=backend, checkpoint_dir=tmp_path / "ckpt")
    client.add("Caroline went to a support group", scope=CAROLINE)
    return client, backend, tmp_path / "ckpt"


def test_use_policy_loads_the_adapter_then_routes_to_it(swap) -> None:
    client, backend, ckpt = swap
    assert client.answer("q?", scope=CAROLINE).text == "smollm2"
    publish(ckpt, "answerer", "v7")
    client.use_policy("answerer", "v7")
    assert backend.loaded == {"answerer-v7": str((ckpt / "answerer" / "v7").resolve())}
    a = client.answer("q?", scope=CAROLINE)
    assert a.text == "answerer-v7" and a.policy_versions["answerer"] == "v7"
    assert client.policies["answerer"].model == "answerer-v7" and client.policies["answerer"].previous == ["base"]
    assert client.policies["answerer"].why == "switched to by use_policy or a promotion v7"
    client.rollback("answerer")
    assert client.answer("q?", scope=CAROLINE).text == "smollm2" and client.policies["answerer"].version == "base"
    assert client.policies["answerer"].why == "rolled back to base"


def test_a_failed_load_keeps_the_old_version(swap) -> None:
    client, backend, ckpt = swap
    publish(ckpt, "answerer", "v1")
    publish(ckpt, "answerer", "v2")
    client.use_policy("answerer", "v1")
    backend.fail_loads = True
    with pytest.raises(PolicyError, match="stays on 'v1'"):
        client.use_policy("answerer", "v2")
    assert client.policies["answerer"].version == "v1"
    assert client.answer("q?", scope=CAROLINE).text == "answerer-v1"
    with pytest.raises(PolicyError, match="no published"):
        client.use_policy("answerer", "v404")


def test_a_request_in_flight_finishes_on_the_version_it_started_with(swap) -> None:
    client, backend, ckpt = swap
    publish(ckpt, "answerer", "v2")
    backend.gate.clear()
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("a", client.answer("q?", scope=CAROLINE)))
    worker.start()
    assert backend.started.wait(10)
    client.use_policy("answerer", "v2")  # swapped while the answer is waiting on the model
    backend.gate.set()
    worker.join(10)
    assert result["a"].text == "smollm2" and result["a"].policy_versions["answerer"] == "base"
    assert client.answer("q?", scope=CAROLINE).text == "answerer-v2"


def test_active_versions_survive_a_restart(swap, make_client, tmp_path) -> None:
    client, backend, ckpt = swap
    publish(ckpt, "answerer", "v3")
    client.use_policy("answerer", "v3")
    client.close()
    again = make_client(backend=backend, checkpoint_dir=ckpt)
    assert again.policies["answerer"].version == "v3"
    assert again.answer("q?", scope=CAROLINE).text == "answerer-v3"


def test_the_watcher_promotes_only_checkpoints_marked_promote(swap) -> None:
    client, backend, ckpt = swap
    publish(ckpt, "answerer", "quiet")
    client.watch_policies(interval_s=0.05)
    time.sleep(0.3)
    assert client.policies["answerer"].version == "base"
    publish(ckpt, "answerer", "shiny", promote=True)
    deadline = time.monotonic() + 5
    while client.policies["answerer"].version != "shiny" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.policies["answerer"].version == "shiny"


def test_a_version_is_served_with_the_prompt_its_manifest_names(make_client, tmp_path) -> None:
    backend = RecordingBackend()
    client = make_client(backend=backend, checkpoint_dir=tmp_path / "ckpt")
    client.add("Caroline went to a support group", scope=CAROLINE)
    prompts = {p: load_prompt(*p.split("/")).system for p in ("extractor/v2", "manager/v3", "r2_extractor/v2", "r2_manager/v2")}

    def ingest_prompts() -> list[tuple[str, str | None]]:
        backend.seen.clear()
        client.ingest({"speaker": "Caroline", "text": "I adopted a dog named Buddy"}, scope=CAROLINE)
        return [(next(k for k, v in prompts.items() if v == system), model) for system, model in backend.seen]

    assert ingest_prompts() == [("extractor/v2", None), ("manager/v3", None)]
    publish(tmp_path / "ckpt", "extractor", "r2-1", prompt="r2_extractor/v2")
    publish(tmp_path / "ckpt", "manager", "r2-1", prompt="r2_manager/v2")
    publish(tmp_path / "ckpt", "manager", "old", prompt=None)  # a manifest from before prompts were recorded
    client.use_policy("extractor", "r2-1")
    client.use_policy("manager", "r2-1")
    assert ingest_prompts() == [("r2_extractor/v2", "extractor-r2-1"), ("r2_manager/v2", "manager-r2-1")]
    assert client.policies["manager"].prompt == "r2_manager/v2"
    client.use_policy("manager", "old")
    assert ingest_prompts() == [("r2_extractor/v2", "extractor-r2-1"), ("manager/v3", "manager-old")]
    client.rollback("manager")
    client.rollback("extractor")
    assert ingest_prompts() == [("extractor/v2", None), ("r2_manager/v2", "manager-r2-1")]
    client.rollback("manager")
    assert ingest_prompts() == [("extractor/v2", None), ("manager/v3", None)]


def test_an_answerer_version_is_shown_the_memories_it_was_trained_or_measured_on_unless_the_app_set_answer_k(make_client, tmp_path) -> None:
    backend = AdapterBackend()
    ckpt = tmp_path / "ckpt"
    client = make_client(backend=backend, checkpoint_dir=ckpt)
    for i in range(12):
        client.add(f"Caroline note {i} about the support group", scope=CAROLINE)
    publish(ckpt, "answerer", "k4", config={"answer_k": 4})
    publish(ckpt, "answerer", "unrecorded")  # a manifest without one: the client's answer_k
    publish(ckpt, "manager", "k3", config={"answer_k": 3})  # only an answerer's k counts
    publish(ckpt, "answerer", "k4-served-at-5", config={"answer_k": 4}, serve_answer_k=5)  # measured apart from its training k

    def shown() -> tuple[int, int]:
        return client.answer("support group?", scope=CAROLINE).retrieved, len(client.retrieve("support group?", scope=CAROLINE))

    assert shown() == (12, 12)  # base: the default 60 holds every note
    client.use_policy("answerer", "k4")
    assert shown() == (4, 4)
    client.use_policy("manager", "k3")
    client.use_policy("answerer", "unrecorded")
    assert shown() == (12, 12)
    client.rollback("answerer")
    assert shown() == (4, 4)
    client.use_policy("answerer", "k4-served-at-5")
    assert shown() == (5, 5)
    client.rollback("answerer")
    client.close()
    again = make_client(backend=backend, checkpoint_dir=ckpt)  # restarted on k4: its k with it
    assert again.policies["answerer"].version == "k4" and len(again.retrieve("support group?", scope=CAROLINE)) == 4
    again.close()
    pinned = make_client(backend=backend, checkpoint_dir=ckpt, answer_k=6)  # the app's own k wins
    assert pinned.policies["answerer"].version == "k4" and len(pinned.retrieve("support group?", scope=CAROLINE)) == 6


@pytest.mark.parametrize(("role", "config", "k"), [("answerer", {"answer_k": 30}, 30), ("answerer", {}, None), ("answerer", {"answer_k": "30"}, None), ("answerer", {"answer_k": True}, None), ("answerer", {"answer_k": 0}, None), ("manager", {"answer_k": 30}, None)])
def test_a_manifest_names_an_answerer_k_only_when_its_config_holds_a_valid_one(role: str, config: dict, k: int | None) -> None:
    assert PolicyManifest(role=role, version="v", base_model="smollm2", config=config).answer_k == k


def test_a_prompt_the_role_cannot_run_is_refused(swap) -> None:
    client, _, ckpt = swap
    with pytest.raises(InvalidInput, match="cannot run prompt"):
        publish(ckpt, "manager", "mixed", prompt="r2_extractor/v2")
    publish(ckpt, "manager", "future")
    manifest = ckpt / "manager" / "future" / "manifest.json"  # written by a newer trainer, say
    manifest.write_text(manifest.read_text().replace('"prompt": null', '"prompt": "r2_manager/v99"'))
    with pytest.raises(PolicyError, match="no prompt r2_manager.v99"):
        client.use_policy("manager", "future")
    assert client.policies["manager"].version == "base" and client.policies["manager"].prompt == "manager/v3"


def test_heuristic_clients_have_no_checkpoints(make_client) -> None:
    with pytest.raises(PolicyError):
        make_client().use_policy("manager", "v1")
