"""A terminal chatbot with memory, on the client directly (no LangChain).

Every line you type is ingested as a turn of yours (stored verbatim in the episodic tier,
facts kept by the policies); a line ending in "?" is answered from your memories, with the
memories the answer relied on. `examples/langchain_agent.py` is the same bot as a LangChain
agent.

    .venv/bin/python examples/chatbot.py --user alice           # SmolLM2 in-process policies
    MEMSDK_POLICIES=heuristic .venv/bin/python examples/chatbot.py  # no LLM at all
    printf 'My dog is called Buddy\\nWhat is my dog called?\\n' | .venv/bin/python examples/chatbot.py

Commands: /memories (list what is kept), /forget ID (soft delete), /quit. The data dir is
MEMSDK_DATA_DIR (default ~/.memsdk), so a second run remembers the first.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from memsdk import MemoryClient
from memsdk.errors import InvalidInput, MemoryNotFound


def reply(client: MemoryClient, scope: dict[str, str], user: str, line: str) -> str:
    if line == "/memories":
        kept = client.list(scope=scope)
        return "\n".join(f"  {r.id} [{r.tier}] {r.render()}" for r in kept) or "  (nothing yet)"
    if line.startswith("/forget "):
        try:
            gone = client.delete(line.split(maxsplit=1)[1].strip(), scope=scope)
        except (MemoryNotFound, InvalidInput) as exc:
            return f"  {exc}"
        return f"  forgot: {gone.text} (restorable)"
    turn = {"speaker": user, "text": line, "timestamp": datetime.now(timezone.utc)}
    if not line.endswith("?"):
        result = client.ingest(turn, scope=scope)
        return f"  noted ({len(result.facts)} facts, {len(result.ops)} changes)"
    # answered before the question is ingested, so that it cannot be its own evidence
    answer = client.answer(line, scope=scope)
    client.ingest(turn, scope=scope)
    cited = "".join(f"\n    - {m.render()}" for m in answer.evidence)
    return f"  {answer.text}{cited}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", default="me", help="whose memory (the scope's user_id)")
    args = parser.parse_args(argv)
    scope = {"user_id": args.user}
    interactive = sys.stdin.isatty()
    with MemoryClient() as client:
        print(f"memsdk chatbot for {args.user!r} ({client.config.policies} policies); /memories, /forget ID, /quit")
        while True:
            if interactive:
                print("> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line or line.strip() == "/quit":
                return 0
            if line.strip():
                if not interactive:
                    print(f"> {line.strip()}")
                print(reply(client, scope, args.user, line.strip()), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
