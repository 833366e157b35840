"""The memsdk command, in-process through main() (real MiniLM, heuristic policies)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsdk._version import __version__
from memsdk.cli import _client_settings, _parser, main

pytestmark = pytest.mark.slow


def run(capsys, *args: str) -> tuple[int, object]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else err)


def test_cli_round_trip(tmp_path, capsys) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        '{"speaker": "Caroline", "text": "I moved from Sweden four years ago", "turn_id": "D1:1"}\n'
        '{"speaker": "Caroline", "text": "I am studying to become a counselor", "turn_id": "D1:2"}\n'
    )
    base = ["--data-dir", str(tmp_path / "data"), "--policies", "heuristic"]
    code, results = run(capsys, *base, "ingest", str(turns), "--user", "caroline")
    assert code == 0 and [r["ops"][0]["op"] for r in results] == ["ADD", "ADD"]
    code, answer = run(capsys, *base, "ask", "Where did Caroline move from?", "--user", "caroline", "--user", "melanie")
    assert code == 0 and "sweden" in answer["text"].lower()
    code, listed = run(capsys, *base, "list", "--user", "caroline", "--tier", "semantic")
    assert [m["source_turn_ids"] for m in listed] == [["D1:1"], ["D1:2"]]
    assert run(capsys, "list", "--user", "caroline", "--tier", "semantic", *base)[1] == listed  # the settings after the command
    code, turns_kept = run(capsys, *base, "list", "--user", "caroline", "--tier", "episodic")
    assert [(m["text"], m["tier"]) for m in turns_kept] == [("I moved from Sweden four years ago", "episodic"), ("I am studying to become a counselor", "episodic")]
    code, history = run(capsys, *base, "history", listed[0]["id"], "--user", "caroline")
    assert [e["event"] for e in history] == ["ADD"]
    export = tmp_path / "caroline.jsonl"
    assert run(capsys, *base, "export", str(export), "--user", "caroline")[1] == {"records": 4}
    run(capsys, *base, "history", "--user", "caroline")
    code, policies = run(capsys, *base, "policies")
    assert policies["manager"]["version"] == "heuristic-v1"
    report = tmp_path / "report.txt"
    report.write_text(" ".join(f"Line {i}: Caroline planted tree {i}." for i in range(200)))
    code, read = run(capsys, *base, "read", str(report), "--user", "caroline", "--budget-tokens", "32", "--chunk-tokens", "256")
    assert code == 0 and read["chunks"] > 1 and read["text"].endswith("Caroline planted tree 199.")
    code, core = run(capsys, *base, "list", "--user", "caroline", "--tier", "core")
    assert [m["id"] for m in core] == [read["memory_id"]]


def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys) -> None:
    base = ["--data-dir", str(tmp_path / "data"), "--policies", "heuristic"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"speaker": "X", "text": "ok"}\n{"speaker": \n')
    code, err = run(capsys, *base, "ingest", str(bad), "--user", "x")
    assert code == 2 and "bad.jsonl:2" in err and err.count("\n") == 1
    code, err = run(capsys, *base, "ask", "anything?")
    assert code == 2 and "scope" in err
    code, err = run(capsys, *base, "ingest", str(tmp_path / "missing.json"), "--user", "x")
    assert code == 2 and "missing.json" in err


def test_version_prints_the_package_version(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out == f"memsdk {__version__}\n"


SETTINGS = ["--data-dir", "D", "--qdrant-url", "http://qdrant:6333", "--llm-base-url", "http://vllm:8000", "--model", "m", "--policies", "heuristic", "--policy", "extractor=llm"]
CLIENT = {"data_dir": Path("D"), "qdrant_url": "http://qdrant:6333", "llm_base_url": "http://vllm:8000", "model": "m", "policies": {"extractor": "llm", "manager": "heuristic", "answerer": "heuristic"}}


@pytest.mark.parametrize(
    "command",
    [
        ["ingest", "t.jsonl", "--user", "u"], ["read", "r.txt", "--user", "u"], ["ask", "q?", "--user", "u"], ["list"], ["history", "m1"],
        ["export", "x.jsonl"], ["import", "x.jsonl"], ["policies"], ["policies", "installed"], ["policies", "evaluate", "answerer", "v2"],
        ["policies", "promote", "answerer", "v2", "--force"], ["use-policy", "manager", "v3"], ["rollback", "manager"],
        ["serve", "--port", "9000"], ["mcp", "--user", "u"], ["train", "answerer", "--from-log", "D"],
        ["eval", "judge", "run", "--judge-url", "http://judge"], ["eval", "compare", "a.json", "b.json"],
    ],
)  # fmt: skip
def test_the_client_settings_go_before_or_after_the_command(command: list[str]) -> None:
    assert _client_settings(_parser().parse_args([*SETTINGS, *command])) == CLIENT
    assert _client_settings(_parser().parse_args([*command, *SETTINGS])) == CLIENT


@pytest.mark.parametrize("command", [["eval", "locomo", "--split", "val"], ["eval", "manage", "--split", "demo"], ["eval", "scenarios", "s.yaml"]])
def test_an_eval_run_takes_them_after_its_command_too(command: list[str]) -> None:
    # these runs have --model, --llm-base-url (and --policies) of their own, which win after the command
    settings = ["--data-dir", "D", "--qdrant-url", "http://qdrant:6333", "--policy", "extractor=llm"]
    before, after = (_client_settings(_parser().parse_args(argv)) for argv in ([*settings, *command], [*command, *settings]))
    assert before == after and after["data_dir"] == Path("D")


def test_a_policy_given_after_the_command_adds_to_those_before_it() -> None:
    args = _parser().parse_args(["--policy", "extractor=llm", "--policy", "manager=llm", "ask", "q?", "--user", "u", "--policy", "manager=heuristic"])
    assert _client_settings(args)["policies"] == {"extractor": "llm", "manager": "heuristic", "answerer": "llm"}
