"""The harness end to end on slices of conv-30 (validation), with the hashing embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

import memsdk.client._base as client_base
from memsdk.cli import main
from memsdk.datasets.locomo import load_locomo
from memsdk.eval import EvalConfig, Evaluator, Judge, load_report
from memsdk.eval.runner import conversation_slice, render_turn

from tests.client.test_policy_swap import AdapterBackend
from tests.policies.conftest import ScriptedBackend
from tests.registry.test_packaged import shelve

pytestmark = pytest.mark.locomo

SMALL = dict(embedder="hash", max_sessions=3, max_questions=10)


@pytest.fixture(scope="module")
def conv30():
    return next(c for c in load_locomo() if c.sample_id == "conv-30")


def test_slice_keeps_only_questions_answerable_from_the_kept_sessions(conv30):
    turns, questions = conversation_slice(conv30, EvalConfig(max_sessions=2))
    kept = {t.turn_id for t in turns}
    assert {t.turn_id.split(":")[0] for t in turns} == {"D1", "D2"}
    assert questions and all(q.category != 5 and set(q.evidence) <= kept for q in questions)
    assert render_turn(turns[0]) == f"{turns[0].speaker} (on {conv30.sessions[0].date_time}): {turns[0].text}"


def test_heuristic_end_to_end_and_resume(conv30, tmp_path, monkeypatch):
    config = EvalConfig(baseline="heuristic", **SMALL)
    with Evaluator(config, tmp_path, progress=False) as ev:
        report = ev.run("val")
    turns, questions = conversation_slice(conv30, config)
    (conv,) = report.conversations
    assert (conv.sample_id, conv.turns, len(conv.questions)) == ("conv-30", len(turns), 10)
    # the heuristic extractor makes one fact per turn of >= 3 words; the manager adds or merges them
    assert 0 < conv.memories <= conv.ingest.facts <= len(turns)
    assert conv.ingest.ops.get("ADD", 0) == conv.memories and len(conv.ingest.latency_s) == len(turns)
    assert conv.ingest.llm_calls == 0 and report.summary.cost.parse_failure_rate is None
    for q in conv.questions:
        assert q.recall[10] <= q.recall[30] <= q.recall[60]
    assert report.summary.overall.n == 10 and report.summary.overall.j is None
    assert sum(s.n for s in report.summary.by_category.values()) == 10

    # resume: a second run with the same config reads the cached conversation, builds nothing
    monkeypatch.setattr(Evaluator, "_from_memory", lambda *a: pytest.fail("rebuilt a cached conversation"))
    with Evaluator(config, tmp_path, progress=False) as ev:
        again = ev.run("val")
    assert again.conversations == report.conversations
    # another config (fewer questions) has another fingerprint: the cache is not used for it
    with pytest.raises(pytest.fail.Exception, match="rebuilt"):
        with Evaluator(config.with_overrides(max_questions=5), tmp_path, progress=False) as ev:
            ev.run("val")


def test_raw_rag_stores_every_turn_and_retrieves_all_evidence_when_all_fits(tmp_path):
    # 2 sessions of conv-30 are < 60 turns per speaker: top-60 per speaker is everything,
    # so recall@60 must be exactly 1 if every memory keeps its turn id
    with Evaluator(EvalConfig(baseline="raw-rag", embedder="hash", max_sessions=2), tmp_path, progress=False) as ev:
        report = ev.run("val")
    (conv,) = report.conversations
    assert conv.memories == conv.turns == conv.ingest.ops["ADD"]
    assert report.summary.overall.recall[60] == 1.0
    assert report.summary.cost.memories_per_turn == 1.0


def test_full_context_answers_when_it_fits_and_says_why_not_otherwise(tmp_path):
    fits = EvalConfig(baseline="full-context", embedder="hash", max_sessions=1, max_questions=2)
    backend = ScriptedBackend("7 May 2023", "dancing")
    with Evaluator(fits, tmp_path / "fits", progress=False, backend=backend) as ev:
        (conv,) = ev.run("val").conversations
    assert conv.skipped is None and [q.prediction for q in conv.questions] == ["7 May 2023", "dancing"]
    assert "Jon (on " in backend.requests[0]["messages"][0]["content"]
    with Evaluator(fits.model_copy(update={"max_sessions": None}), tmp_path / "whole", progress=False, backend=ScriptedBackend()) as ev:
        report = ev.run("val")
    assert "exceed the 2048-token context" in report.summary.skipped["conv-30"]
    assert report.summary.overall.n == 0


def test_judge_labels_are_parsed_and_make_j(tmp_path):
    judge = Judge(ScriptedBackend('{"label": "CORRECT"}', "WRONG.", "I am not sure"))
    with Evaluator(EvalConfig(baseline="raw-rag", embedder="hash", max_sessions=2, max_questions=3), tmp_path, progress=False, judge=judge) as ev:
        s = ev.run("val").summary.overall
    assert [r["messages"][0]["content"].count("Gold answer:") for r in judge.backend.requests] == [1, 1, 1]
    assert (s.judged, s.j) == (2, 0.5)  # the third reply names neither label: not judged


def test_cli_writes_the_three_outputs_and_compares(tmp_path, capsys):
    common = ["--split", "val", "--embedder", "hash", "--max-sessions", "2", "--max-questions", "5", "--no-progress"]
    assert main(["eval", "locomo", *common, "--baseline", "raw-rag", "--out", str(tmp_path / "a")]) == 0
    assert main(["eval", "locomo", *common, "--baseline", "heuristic", "--out", str(tmp_path / "b")]) == 0
    for run in ("a", "b"):
        assert {p.name for p in (tmp_path / run).iterdir()} >= {"report.json", "report.md", "report.png", "conversations"}
        assert (tmp_path / run / "report.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["eval", "compare", str(tmp_path / "a" / "report.json"), str(tmp_path / "b" / "report.json")]) == 0
    table = capsys.readouterr().out
    a = json.loads((tmp_path / "a" / "report.json").read_text())["summary"]["cost"]["memories_per_turn"]
    b = json.loads((tmp_path / "b" / "report.json").read_text())["summary"]["cost"]["memories_per_turn"]
    assert f"| memories per turn | {a:.3f} | {b:.3f} | {b - a:+.3f} |" in table


def test_the_default_combination_ingests_without_an_llm_and_answers_on_the_chosen_adapter(tmp_path, monkeypatch):
    """heuristic ingest + the LLM answerer on an adapter (the client's default over SmolLM2,
    `--baseline heuristic --answerer llm --answerer-version locomo-v1`): no LLM call at ingest,
    every answer routed to the adapter, the adapter part of the fingerprint."""
    monkeypatch.setattr(client_base, "PACKAGED_DIR", tmp_path / "packaged")
    shelve(tmp_path / "packaged", "answerer", "locomo-v1")
    backend = AdapterBackend()  # answers with the name of the model a request was routed to
    config = EvalConfig(baseline="heuristic", answerer="llm", answerer_version="locomo-v1", **SMALL)
    with Evaluator(config, tmp_path / "run", progress=False, backend=backend) as ev:
        (conv,) = ev.run("val").conversations
    assert conv.ingest.llm_calls == 0 and conv.ingest.facts > 0
    assert list(backend.loaded) == ["answerer-locomo-v1"]
    assert {q.prediction for q in conv.questions} == {"answerer-locomo-v1"} and all(q.llm_calls == 1 for q in conv.questions)
    assert config.fingerprint() != config.with_overrides(answerer_version="base").fingerprint()
    assert EvalConfig(baseline="heuristic", answer_k=30).fingerprint() == EvalConfig(baseline="heuristic", answer_k=30, answerer_version="base").fingerprint()
    # no answer_k: the client's own, which over base is 60 (cached runs from before keep their
    # fingerprints); over a version it may be the version's training k, so it is not 60's
    assert EvalConfig(baseline="heuristic").fingerprint() == EvalConfig(baseline="heuristic", answer_k=60).fingerprint()
    assert config.fingerprint() != config.with_overrides(answer_k=60).fingerprint()
    with pytest.raises(ValidationError, match="answerer='llm'"):
        EvalConfig(baseline="heuristic", answerer_version="locomo-v1")  # the extractive answerer has no adapter


def test_config_file_and_flags(tmp_path):
    path = tmp_path / "eval.toml"
    path.write_text('baseline = "llm"\nanswer_k = 20\nrecall_ks = [5, 50]\n')
    config = EvalConfig.load(path).with_overrides(baseline="heuristic", judge_url=None)
    assert (config.baseline, config.answer_k, config.recall_ks, config.judge_url) == ("heuristic", 20, (5, 50), None)
    assert config.fingerprint() != EvalConfig.load(path).fingerprint()
    assert config.fingerprint() == config.with_overrides(concurrency=8).fingerprint()
    # the judge only labels answers, and can label them later: it must not void cached answers
    assert config.fingerprint() == config.with_overrides(judge_url="http://judge:8000", judge_model="big").fingerprint()


def test_results_cached_before_the_judge_left_the_fingerprint_still_load():
    # fingerprints as computed when the judge was hashed as configured (up to commit af580d7)
    # (and before tiers: a single-tier run is the run those results came from; a tiered one is not)
    assert EvalConfig(tiers=False, hybrid=False).fingerprint() == "ab7623c180c1c84c"  # no judge: unchanged
    assert EvalConfig(tiers=False, hybrid=False, judge_url="http://j:8000").accepts("f612c04800bbbb4b")  # judged: accepted under the same judge
    assert not EvalConfig(tiers=False, hybrid=False, max_questions=5).accepts("ab7623c180c1c84c")
    assert not EvalConfig().accepts("ab7623c180c1c84c") and not EvalConfig(tiers=False).accepts("ab7623c180c1c84c")


@pytest.mark.vllm
def test_judge_on_the_real_vllm_server(vllm_server, tmp_path: Path):
    config = EvalConfig(baseline="heuristic", judge_url=vllm_server.base_url, judge_model="smollm2", embedder="hash", max_sessions=2, max_questions=4, concurrency=2)
    with Evaluator(config, tmp_path, progress=False) as ev:
        report = ev.run("val")
    questions = report.conversations[0].questions
    # whatever the 135M model decides, json_schema decoding holds it to one of the two labels
    assert len(questions) == 4 and all(q.judge in ("CORRECT", "WRONG") for q in questions)
    assert report.summary.overall.judged == 4
    assert report.summary.overall.j == sum(q.judge == "CORRECT" for q in questions) / 4
    # `eval judge` on the judged run asks nothing more, and its report names the judge
    assert main(["eval", "judge", str(tmp_path), "--judge-url", vllm_server.base_url, "--no-progress"]) == 0
    assert [j.model for j in load_report(tmp_path / "report.json").judged_by] == ["smollm2"]


def test_concurrent_answering_gives_the_sequential_results(tmp_path):
    # questions answered from several threads share one client and bank; order and scores must not change
    config = EvalConfig(baseline="heuristic", embedder="hash", max_sessions=3, max_questions=12)
    runs = []
    for workers in (1, 4):
        with Evaluator(config.with_overrides(concurrency=workers), tmp_path / str(workers), progress=False) as ev:
            runs.append(ev.run("val").conversations[0].questions)
    strip = lambda qs: [q.model_dump(exclude={"latency_s"}) for q in qs]  # noqa: E731
    assert strip(runs[0]) == strip(runs[1])


def test_a_long_ingest_leaves_a_progress_file_until_it_finishes(tmp_path, monkeypatch):
    import memsdk.eval.runner as runner

    seen = []
    write = runner.write_atomic
    monkeypatch.setattr(runner, "write_atomic", lambda path, text: (seen.append((path.name, json.loads(text))), write(path, text)))
    with Evaluator(EvalConfig(baseline="heuristic", embedder="hash", max_sessions=2, max_questions=1), tmp_path, progress=False) as ev:
        report = ev.run("val")
    progress = [body for name, body in seen if name == "conv-30.progress.json"]
    turns = report.conversations[0].turns
    assert [p["ingest"]["turns"] for p in progress] == list(range(10, turns, 10))
    assert all(p["turns_total"] == turns for p in progress)
    assert not (tmp_path / "conversations" / "conv-30.progress.json").exists()


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"answer_k": 0}')
    assert main(["eval", "locomo", "--split", "val", "--config", str(bad), "--out", str(tmp_path)]) == 2
    assert main(["eval", "locomo", "--split", "test", "--embedder", "hash", "--conversations", "conv-30", "--out", str(tmp_path)]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[0].startswith("memsdk: error: config.answer_k") and "conv-30" in errors[1] and "test split" in errors[1]


def test_a_run_lists_each_retired_fact_with_its_successor(tmp_path: Path) -> None:
    from memsdk import MemoryClient
    from memsdk.embedding import HashEmbedder
    from memsdk.eval.runner import retirements
    from memsdk.types import Op, Scope

    scopes = [Scope(user_id="a", run_id="c"), Scope(user_id="b", run_id="c")]
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies="heuristic") as client:
        old = client.add("I live in Paris", scope=scopes[0])
        client.add("I have a dog", scope=scopes[1])
        client.bank.apply(scopes[0], [Op.add("We moved to Lyon", supersedes=(old.id,))])
        assert [(r.retired, r.by) for r in retirements(client, scopes)] == [("I live in Paris", "We moved to Lyon")]
