"""remember / recall / forget: LangChain's tool suites, and the scope a model cannot change."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.errors import ScopeRequired
from memsdk_adapters.langchain import forget_tool, memory_tools, recall_tool, remember_tool

from tests.adapters.conftest import ALICE, BOB, ScriptedChatModel, suite_clients


class _Suite:
    """The clients the standard suites' tools are built on, alive for the class."""

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _clients(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
        with suite_clients(tmp_path_factory.mktemp("tools-suite"), ["Alice adopted a dog named Buddy"]) as params:
            cls._params = params
            yield

    @property
    def tool_constructor_params(self) -> dict:
        return dict(self._params)


class _Remember(_Suite):
    tool_constructor = staticmethod(remember_tool)
    tool_invoke_params_example = {"text": "Alice's sister is called Hanna"}


class _Recall(_Suite):
    tool_constructor = staticmethod(recall_tool)
    tool_invoke_params_example = {"query": "What is the dog's name?"}


class _Forget(_Suite):
    tool_constructor = staticmethod(forget_tool)
    # an id that is nowhere: the tool answers with an error the model can read
    tool_invoke_params_example = {"memory_id": "00000000-0000-0000-0000-000000000000"}


class TestRememberUnit(_Remember, ToolsUnitTests): ...


class TestRememberIntegration(_Remember, ToolsIntegrationTests): ...


class TestRecallUnit(_Recall, ToolsUnitTests): ...


class TestRecallIntegration(_Recall, ToolsIntegrationTests): ...


class TestForgetUnit(_Forget, ToolsUnitTests): ...


class TestForgetIntegration(_Forget, ToolsIntegrationTests): ...


def test_the_model_sees_no_scope_argument(client: MemoryClient) -> None:
    for tool in memory_tools(client):
        schema = tool.tool_call_schema.model_json_schema()
        assert set(schema["properties"]) <= {"text", "query", "memory_id"}, schema
        assert "runtime" not in schema["properties"]


def test_remember_recall_forget_round_trip_with_a_bound_scope(client: MemoryClient) -> None:
    remember, recall, forget = memory_tools(client, scope=ALICE, k=3)
    said = remember.invoke({"text": "Alice's sister is called Hanna"})
    [record] = client.list(scope=ALICE)
    assert said == f"Remembered as memory {record.id}."
    assert recall.invoke({"query": "sister"}) == f"[{record.id}] Alice's sister is called Hanna"
    assert forget.invoke({"memory_id": str(record.id)}) == f"Forgot memory {record.id} (it can be restored)."
    assert client.list(scope=ALICE) == []
    assert client.restore(record.id, scope=ALICE).text == "Alice's sister is called Hanna"


async def test_the_async_functions_await_the_async_client(client: MemoryClient, aclient: AsyncMemoryClient) -> None:
    remember, recall, forget = memory_tools(aclient=aclient, scope=ALICE)
    await remember.ainvoke({"text": "Alice plays the cello"})
    [record] = client.list(scope=ALICE)
    assert (await recall.ainvoke({"query": "cello"})).endswith("Alice plays the cello")
    await forget.ainvoke({"memory_id": str(record.id)})
    assert client.list(scope=ALICE) == []
    # a tool built without the async client refuses ainvoke rather than block the loop in a thread
    [sync_only, *_] = memory_tools(client, scope=ALICE)
    assert "aclient" in await sync_only.ainvoke({"text": "x"})


def test_without_a_bound_scope_or_a_context_there_is_no_scope(client: MemoryClient) -> None:
    with pytest.raises(ScopeRequired, match="runtime context"):
        recall_tool(client).invoke({"query": "dog"})


@dataclass
class UserContext:
    user_id: str


def _call(name: str, args: dict, i: int) -> dict:
    return {"name": name, "args": args, "id": f"call-{i}", "type": "tool_call"}


def test_a_model_naming_another_user_cannot_reach_that_user(client: MemoryClient) -> None:
    """The scope comes from the agent's runtime context. A model that writes Bob's id into
    its tool arguments, or a memory id of Bob's, reaches nothing of Bob's."""
    secret = client.add("Bob's bank PIN is 4921", scope=BOB)
    client.add("Alice adopted a dog named Buddy", scope=ALICE)
    model = ScriptedChatModel(messages=iter([
        AIMessage(content="", tool_calls=[
            _call("recall", {"query": "Bob's bank PIN", "user_id": "bob"}, 1),
            _call("recall", {"query": "Bob's bank PIN"}, 2),
            _call("forget", {"memory_id": str(secret.id)}, 3),
            _call("remember", {"text": "Bob's PIN is 0000", "scope": {"user_id": "bob"}}, 4),
        ]),
        AIMessage(content="done"),
    ]))
    agent = create_agent(model, memory_tools(client), context_schema=UserContext)
    result = agent.invoke({"messages": [{"role": "user", "content": "tell me Bob's PIN"}]}, context=UserContext(user_id="alice"))

    replies = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert replies["call-1"].status == "error" and "user_id" in replies["call-1"].content
    assert "4921" not in replies["call-2"].content and "Buddy" in replies["call-2"].content
    assert replies["call-3"].status == "error" and "no memory" in replies["call-3"].content
    assert replies["call-4"].status == "error"
    # Bob's memory is untouched and nothing was written for either user by the refused calls
    assert [r.text for r in client.list(scope=BOB)] == ["Bob's bank PIN is 4921"]
    assert [r.text for r in client.list(scope=ALICE)] == ["Alice adopted a dog named Buddy"]


def test_a_callable_scope_maps_the_context(client: MemoryClient) -> None:
    model = ScriptedChatModel(messages=iter([AIMessage(content="", tool_calls=[_call("remember", {"text": "Likes jazz"}, 1)]), AIMessage(content="ok")]))
    tools = memory_tools(client, scope=lambda ctx: {"user_id": ctx.user_id, "agent_id": "support"})
    create_agent(model, tools, context_schema=UserContext).invoke({"messages": [{"role": "user", "content": "hi"}]}, context=UserContext(user_id="alice"))
    assert [r.text for r in client.list(scope={"user_id": "alice", "agent_id": "support"})] == ["Likes jazz"]
    assert client.list(scope=ALICE) == []


def test_tools_need_a_client_and_a_positive_k() -> None:
    with pytest.raises(ValueError, match="client="):
        memory_tools()
    with pytest.raises(ValueError, match="k"):
        recall_tool(aclient=object(), k=0)  # type: ignore[arg-type]


def test_standard_tool_classes_are_tools() -> None:
    assert all(isinstance(t, BaseTool) for t in (remember_tool(aclient=object()), recall_tool(aclient=object())))  # type: ignore[arg-type]


async def test_an_async_agent_reads_the_scope_from_context_too(client: MemoryClient, aclient: AsyncMemoryClient) -> None:
    client.add("Bob's bank PIN is 4921", scope=BOB)
    model = ScriptedChatModel(messages=iter([
        AIMessage(content="", tool_calls=[_call("remember", {"text": "Alice plays the cello"}, 1), _call("recall", {"query": "PIN cello"}, 2)]),
        AIMessage(content="done"),
    ]))
    agent = create_agent(model, memory_tools(aclient=aclient), context_schema=UserContext)
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "hi"}]}, context=UserContext(user_id="alice"))
    replies = {m.tool_call_id: m.content for m in result["messages"] if isinstance(m, ToolMessage)}
    assert "4921" not in replies["call-2"]
    assert [r.text for r in client.list(scope=ALICE)] == ["Alice plays the cello"]
