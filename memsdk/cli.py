"""The ``memsdk`` command: the client's methods from a shell.

    memsdk ingest conversation.jsonl --user caroline
    memsdk ask "Where did Caroline move from?" --user caroline --user melanie
    memsdk read report.txt --user caroline [--budget-tokens 256 --chunk-tokens 1024]
    memsdk list --user caroline
    memsdk history [MEMORY_ID] --user caroline
    memsdk export caroline.jsonl --user caroline
    memsdk import caroline.jsonl [--user someone-else]
    memsdk policies                     (active versions, gate decisions, audit trail)
    memsdk policies evaluate answerer v2 [--against base] [--on locomo-val|log|states.jsonl]
    memsdk policies evaluate manager v2 --on log   (the manager's gate replays logged ingests only)
    memsdk policies promote answerer v2 [--force]
    memsdk policies installed           (policies other packages installed: memsdk.policies entry points)
    memsdk --policy extractor=heuristic --policy manager='{"base_url": "http://vllm:8000"}' ask ...
    memsdk use-policy manager v3        memsdk rollback manager
    memsdk eval locomo --split val      memsdk eval compare A.json B.json   (see memsdk.eval.cli)
    memsdk serve [--host 0.0.0.0 --port 8080 --keys-file keys.json]   (memsdk[server]; see memsdk.server)
    memsdk train answerer|manager --from-log DATA_DIR   (retrain from judged traffic, promote if the gate passes;
                                        a ``memsdk.commands`` entry point of memsdk[training])

The client's settings (``--data-dir``, ``--qdrant-url``, ``--llm-base-url``, ``--model``,
``--policies``, ``--policy ROLE=SPEC``) go before or after the command and default to the
``MEMSDK_*`` environment; ``memsdk --version`` prints the version. Output is JSON on stdout;
errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memsdk._version import __version__
from memsdk.errors import InvalidInput, MemsdkError

__all__ = ["main"]


def _scope_args(p: argparse.ArgumentParser, *, multiple: bool = False) -> None:
    p.add_argument("--user", action="append" if multiple else "store", help="user_id" + (" (repeat for several scopes)" if multiple else ""))
    p.add_argument("--agent", help="agent_id")
    p.add_argument("--run", help="run_id")


#: the client's settings, which every command takes before or after its name
_SETTINGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--data-dir", {"type": Path}),
    ("--qdrant-url", {}),
    ("--llm-base-url", {}),
    ("--model", {}),
    ("--policies", {"choices": ["auto", "llm", "heuristic"]}),
    ("--policy", {"action": "append", "metavar": "ROLE=SPEC", "help": "one role's policy: heuristic, llm, an installed policy's name or an LLM spec's JSON (repeatable)"}),
)


def _settings_args(p: argparse.ArgumentParser, depth: int = 0) -> None:
    group = p.add_argument_group("client settings (before or after the command; default: the MEMSDK_* environment)")
    for flag, options in _SETTINGS:
        if depth:
            # a subcommand's parser writes its defaults over what the parsers above it read:
            # SUPPRESS keeps `memsdk --model M ask ...` intact, and each level appends its
            # --policy to a list of its own (`_role_policies` joins them in order)
            options = {**options, "default": argparse.SUPPRESS}
            if options.get("action") == "append":
                options["dest"] = f"policy_after_{depth}"
        elif options.get("action") == "append":
            options = {**options, "default": []}
        try:
            group.add_argument(flag, **options)
        except argparse.ArgumentError:  # the command's own option of that name wins (eval's --model)
            pass


def _settings_after_commands(parser: argparse.ArgumentParser, depth: int = 1) -> None:
    """The settings on every subcommand's parser too, at any depth and whichever package
    added it, so that `memsdk serve --data-dir D` means `memsdk --data-dir D serve`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _settings_args(sub, depth)
                _settings_after_commands(sub, depth + 1)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memsdk", description="Agent memory with trained, hot-swappable policies.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _settings_args(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="ingest turns from a JSON array or JSONL file")
    p.add_argument("file", type=Path)
    _scope_args(p)
    p = sub.add_parser("read", help="read a long text (or a JSON / JSONL file of turns) into the scope's core memory, chunk by chunk (MemAgent)")
    p.add_argument("file", type=Path)
    p.add_argument("--budget-tokens", type=int, default=256)
    p.add_argument("--chunk-tokens", type=int, default=1024)
    _scope_args(p)
    p = sub.add_parser("ask", help="answer a question from memory")
    p.add_argument("question")
    _scope_args(p, multiple=True)
    p = sub.add_parser("list", help="list memories")
    p.add_argument("--include-deleted", action="store_true")
    p.add_argument("--tier", choices=["episodic", "semantic", "core"], help="only this tier (default: all)")
    _scope_args(p)
    p = sub.add_parser("history", help="audit history of a scope or one memory")
    p.add_argument("memory_id", nargs="?")
    _scope_args(p)
    p = sub.add_parser("export", help="export a scope as JSONL")
    p.add_argument("file", type=Path)
    _scope_args(p)
    p = sub.add_parser("import", help="import a JSONL export")
    p.add_argument("file", type=Path)
    _scope_args(p)
    p = sub.add_parser("policies", help="show the active policy versions, their gate decisions and promotions")
    gate = p.add_subparsers(dest="policy_command")
    gate.add_parser("installed", help="list the policies installed under the memsdk.policies entry points")
    for name, helptext in (("evaluate", "compare a published version with the incumbent (the release gate), switch nothing"), ("promote", "serve a published version if the release gate passes")):
        q = gate.add_parser(name, help=helptext)
        q.add_argument("role")
        q.add_argument("version")
        q.add_argument("--on", default="locomo-val", help="'locomo-val', 'log' (the answers this data dir's users judged; for the manager, the ingests they cited: its only source) or a JSONL file of answerer states (memsdk.gate)")
        q.add_argument("--margin", type=float, default=0.0, help="the reward difference's lower bound must exceed it")
        if name == "evaluate":
            q.add_argument("--against", help="the incumbent (default: the version serving now)")
        else:
            q.add_argument("--force", action="store_true", help="skip the gate (recorded in the audit trail)")
    p = sub.add_parser("use-policy", help="switch a role to a published checkpoint")
    p.add_argument("role")
    p.add_argument("version")
    p = sub.add_parser("rollback", help="switch a role back to its previous version")
    p.add_argument("role")
    from memsdk.eval.cli import add_parser as add_eval_parser
    from memsdk.server.cli import add_parser as add_serve_parser

    add_eval_parser(sub)
    add_serve_parser(sub)
    _installed_commands(sub)
    _settings_after_commands(parser)
    return parser


#: entry points whose function adds a subcommand: ``register(subparsers)``; the subcommand
#: sets ``handler(args, client_settings) -> result`` and builds what it needs itself
COMMANDS = "memsdk.commands"


def _installed_commands(sub: Any) -> None:
    """Commands other packages install (memsdk[training] adds ``train``), so the runtime
    imports none of them; ``train`` without the package says what to install."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=COMMANDS):
        if ep.name in sub.choices:  # the first on sys.path wins, and no package replaces a built-in command
            continue
        try:
            ep.load()(sub)
        except Exception as exc:  # a broken package must not break the other commands
            print(f"memsdk: command {ep.name!r} from {ep.value} is unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    if "train" not in sub.choices:
        p = sub.add_parser("train", help="retrain a policy from logged traffic (needs memsdk[training])")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(handler=_needs_training)


def _needs_training(args: argparse.Namespace, settings: dict[str, Any]) -> Any:
    raise InvalidInput("train", "needs the training package: pip install 'memsdk[training]'")


def _scope(args: argparse.Namespace, *, required: bool = True) -> Any:
    users = args.user if isinstance(args.user, list) else [args.user]
    scopes = [{k: v for k, v in {"user_id": u, "agent_id": args.agent, "run_id": args.run}.items() if v} for u in users]
    scopes = [s for s in scopes if s]
    if not scopes:
        if required:
            raise InvalidInput("scope", "give --user, --agent or --run")
        return None
    return scopes if isinstance(args.user, list) and len(scopes) > 1 else scopes[0]


def _read_turns(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        pass
    turns = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                turns.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{path}:{n}", f"not JSON ({exc.msg})") from None
    return turns


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _run(args: argparse.Namespace) -> Any:
    from memsdk.client import MemoryClient

    if args.command == "policies" and args.policy_command == "installed":  # needs no client
        from memsdk.serving.plugins import installed

        return installed()
    settings = _client_settings(args)
    if handler := getattr(args, "handler", None):  # an installed command builds its own client
        return handler(args, settings)
    with MemoryClient(**settings) as client:
        match args.command:
            case "ingest":
                return client.ingest(_read_turns(args.file), scope=_scope(args))
            case "read":
                source = _read_turns(args.file) if args.file.suffix in (".json", ".jsonl") else args.file.read_text(encoding="utf-8")
                return client.read(source, scope=_scope(args), budget_tokens=args.budget_tokens, chunk_tokens=args.chunk_tokens)
            case "ask":
                return client.answer(args.question, scope=_scope(args))
            case "list":
                return client.list(scope=_scope(args), include_deleted=args.include_deleted, tier=args.tier)
            case "history":
                return client.history(args.memory_id, scope=_scope(args))
            case "export":
                return {"records": client.export(args.file, scope=_scope(args))}
            case "import":
                return {"records": client.import_(args.file, scope=_scope(args, required=False))}
            case "policies":
                return _policies(client, args)
            case "use-policy":
                client.use_policy(args.role, args.version)
                return client.policies
            case "rollback":
                client.rollback(args.role)
                return client.policies
    raise AssertionError(args.command)  # argparse only lets known commands through


def _client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``MemoryClient`` keywords the settings give (the ones not given: the environment's)."""
    given = {"data_dir": args.data_dir, "qdrant_url": args.qdrant_url, "llm_base_url": args.llm_base_url, "model": args.model, "policies": _role_policies(args)}
    return {k: v for k, v in given.items() if v}


def _role_policies(args: argparse.Namespace) -> Any:
    """``--policies`` with the ``--policy ROLE=SPEC`` options on top (None: the environment's);
    a later option for a role wins, after the command name too."""
    items = [item for dest, given in sorted(vars(args).items()) if dest == "policy" or dest.startswith("policy_after_") for item in given]
    if not items:
        return args.policies
    per_role: dict[str, str] = {}
    for item in items:
        role, sep, spec = item.partition("=")
        if not sep or not role.strip() or not spec.strip():
            raise InvalidInput("--policy", f"expected ROLE=SPEC, e.g. extractor=heuristic, got {item!r}")
        per_role[role.strip()] = spec.strip()
    return {**dict.fromkeys(("extractor", "manager", "answerer"), args.policies or "llm"), **per_role}


def _policies(client: Any, args: argparse.Namespace) -> Any:
    from memsdk.gate import GateConfig

    command = getattr(args, "policy_command", None)
    if command == "evaluate":
        return client.evaluate_policy(args.role, args.version, against=args.against, on=args.on, config=GateConfig(margin=args.margin))
    if command == "promote":
        decision = client.promote(args.role, args.version, force=args.force, on=args.on, config=GateConfig(margin=args.margin))
        return {"promoted": args.version, "forced": args.force, "decision": decision, "active": client.policies}
    registry = client.registry
    shown = {}
    for role, info in client.policies.items():
        versions = [m.version for m in registry.versions(role)]
        decisions = {v: d.summary() for v in versions if (d := registry.decision(role, v)) is not None}
        packaged = [v for v in versions if registry.is_packaged(role, v)]  # shipped inside memsdk, read-only
        shown[role] = {**info.model_dump(mode="json"), "published": versions, "packaged": packaged, "gate": decisions, "promotions": [p.model_dump(mode="json") for p in registry.promotions(role)][-5:]}
    return shown


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "eval":  # prints its own tables and writes files, no JSON result
            from memsdk.eval.cli import run as run_eval

            return run_eval(args)
        result = _run(args)
    except (MemsdkError, OSError) as exc:
        print(f"memsdk: error: {exc}", file=sys.stderr)
        return 2
    json.dump(_dump(result), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
