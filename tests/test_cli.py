"""The memsdk command, in-process through main() (real MiniLM, heuristic policies)."""

from __future__ import annotations

import json

import pytest

from memsdk.cli import main

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
