"""The terminal chatbot of `examples/chatbot.py`, as a LangChain agent (``create_agent``).

`MemsdkMiddleware` puts the memories relevant to each line into the model's system message
and, after each reply, queues the exchange for ingest on a background thread (the reply
never waits for it; quitting drains the queue). The memory tools (remember / recall /
forget) let the model write and search memory itself. The scope is the runtime context's
``user_id``: neither the model nor the tools choose it.

    .venv/bin/python examples/langchain_agent.py --user alice       # offline: a fake chat model
    MEMSDK_CHAT_MODEL=openai:gpt-4o-mini .venv/bin/python examples/langchain_agent.py --user alice
    printf 'My dog is called Buddy\\nWhat is my dog called?\\n' | .venv/bin/python examples/langchain_agent.py

Without ``MEMSDK_CHAT_MODEL`` (any ``init_chat_model`` string, its provider package and key
installed) the model is LangChain's fake chat model, made to read its prompt: it answers a
question with the memories it was shown, calls ``remember`` for "remember that ...", calls
``forget`` for "forget ID", and otherwise says "Noted.". Commands: /memories, /quit. The data
dir is MEMSDK_DATA_DIR, so a second run remembers the first.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from memsdk import MemoryClient
from memsdk_adapters.langchain import MemsdkMiddleware, memory_tools

SYSTEM = "You are a friendly assistant with a long memory. Use the memories below when they help; use the memory tools to remember, recall or forget on request."


class OfflineChatModel(GenericFakeChatModel):
    """A stand-in for a real chat model: replies from its prompt, with no network."""

    messages: Any = iter(())

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(last.text)
        line = last.text.strip()
        call = lambda name, args: AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{uuid.uuid4().hex[:8]}"}])  # noqa: E731
        if m := re.fullmatch(r"remember that (.+)", line, re.I):
            return call("remember", {"text": m[1]})
        if m := re.fullmatch(r"forget (\S+)", line, re.I):
            return call("forget", {"memory_id": m[1]})
        if line.endswith("?"):
            system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
            shown = re.findall(r"^\d+\. <<<(.*)>>>$", system, re.M)
            return AIMessage("From memory: " + " | ".join(shown[:3]) if shown else "I don't remember anything about that.")
        return AIMessage("Noted.")


def chat_model() -> BaseChatModel:
    if name := os.environ.get("MEMSDK_CHAT_MODEL"):
        from langchain.chat_models import init_chat_model

        return init_chat_model(name)
    return OfflineChatModel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", default="me", help="whose memory (the scope's user_id)")
    args = parser.parse_args(argv)
    context = {"user_id": args.user}
    session = {"configurable": {"thread_id": uuid.uuid4().hex}}  # this run's history; memsdk keeps the rest
    interactive = sys.stdin.isatty()
    # the middleware closes first (leaving the with block), so its queue drains into an open client
    with MemoryClient() as client, MemsdkMiddleware(client, k=5) as memory:
        model = chat_model()
        agent = create_agent(model, memory_tools(client), system_prompt=SYSTEM, middleware=[memory], checkpointer=InMemorySaver())
        print(f"memsdk agent for {args.user!r} ({client.config.policies} policies, {type(model).__name__}); /memories, /quit")
        while True:
            if interactive:
                print("> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line or line.strip() == "/quit":
                return 0
            if not (line := line.strip()):
                continue
            if not interactive:
                print(f"> {line}")
            if line == "/memories":
                kept = client.list(scope=context)
                print("\n".join(f"  {r.id} [{r.tier}] {r.render()}" for r in kept) or "  (nothing yet)", flush=True)
                continue
            out = agent.invoke({"messages": [HumanMessage(line)]}, session, context=context)
            print(f"  {out['messages'][-1].text}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
