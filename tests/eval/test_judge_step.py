"""`memsdk eval judge`: J added to a finished run, against a fake OpenAI-compatible judge server."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from memsdk.cli import main
from memsdk.errors import PolicyUnavailable
from memsdk.eval import ConversationResult, Evaluator, Judge, JudgeRef, judge_run, load_report

from tests.llm._stub_server import Reply, StubServer, chat_body
from tests.policies.conftest import ScriptedBackend

pytestmark = pytest.mark.locomo

SLICE = ["--split", "val", "--conversations", "conv-30", "--embedder", "hash", "--max-sessions", "3", "--max-questions", "10", "--no-progress"]
CORRECT, WRONG, NEITHER = '{"label": "CORRECT"}', '{"label": "WRONG"}', "I cannot tell"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A heuristic run on 10 questions of conv-30 without a judge; each test judges a copy."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main(["eval", "locomo", *SLICE, "--baseline", "heuristic", "--out", str(out)]) == 0
    return out


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / "run"))


def replies(*texts: str) -> list[Reply]:
    return [Reply(body=chat_body(t)) for t in texts]


def conv30(run_dir: Path) -> ConversationResult:
    return ConversationResult.model_validate_json((run_dir / "conversations" / "conv-30.json").read_text())


def answers(run_dir: Path) -> list[dict]:
    """What the run generated, which judging must not touch."""
    return [q.model_dump(exclude={"judge", "judge_reply"}) for q in conv30(run_dir).questions]


def files(run_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def judge(run_dir: Path, url: str, *flags: str) -> int:
    return main(["eval", "judge", str(run_dir), "--judge-url", url, "--no-progress", *flags])


def test_judge_labels_a_finished_run_and_its_report_counts_them(run_dir, capsys):
    generated = answers(run_dir)
    with StubServer(replies(*[CORRECT] * 3, NEITHER, *[WRONG] * 6)) as stub:
        assert judge(run_dir, stub.url, "--judge-model", "judge-m", "--concurrency", "3") == 0
        bodies = [body for _, path, body in stub.requests if path == "/v1/chat/completions"]
        assert len(stub.requests) == len(bodies) == 10
        assert all(b["model"] == "judge-m" and b["temperature"] == 0.0 and "Gold answer:" in b["messages"][0]["content"] for b in bodies)

        questions = conv30(run_dir).questions
        labels = [q.judge for q in questions]
        assert (labels.count("CORRECT"), labels.count("WRONG"), labels.count(None)) == (3, 6, 1)
        assert all(q.judge_reply is not None for q in questions) and answers(run_dir) == generated

        report = load_report(run_dir / "report.json")
        assert (report.summary.overall.judged, report.summary.overall.j) == (9, 3 / 9)
        for name, scores in report.summary.by_category.items():
            mine = [q.judge for q in questions if q.category_name == name and q.judge is not None]
            assert scores.j == (mine.count("CORRECT") / len(mine) if mine else None)
        assert report.judged_by == [JudgeRef(url=stub.url, model="judge-m")]
        table = (run_dir / "report.md").read_text()
        overall = next(line for line in table.splitlines() if line.startswith("| **overall** |"))
        assert overall.split(" | ")[5] == "0.333"  # | name | n | F1 | BLEU-1 | EM | J | ...
        assert f"J judged by judge-m at {stub.url}: 9 of 10" in table and overall in capsys.readouterr().out

        # a second pass finds every question asked (the reply naming neither label too): no request
        judged = files(run_dir / "conversations")
        assert judge(run_dir, stub.url) == 0
        assert len(stub.requests) == 10 and files(run_dir / "conversations") == judged

        # --rejudge asks again; the stub's last reply (WRONG) repeats
        assert judge(run_dir, stub.url, "--rejudge") == 0
        assert len(stub.requests) == 20
        assert load_report(run_dir / "report.json").summary.overall.j == 0.0


def test_judge_settings_do_not_void_a_runs_cached_answers(run_dir, monkeypatch):
    monkeypatch.setattr(Evaluator, "_from_memory", lambda *a: pytest.fail("rebuilt a cached conversation"))
    generated = answers(run_dir)
    locomo = ["eval", "locomo", *SLICE, "--baseline", "heuristic", "--out", str(run_dir)]
    with StubServer(replies(CORRECT, WRONG)) as stub:
        # resumed with a judge, the run labels its cached answers instead of redoing them
        assert main([*locomo, "--judge-url", stub.url]) == 0
        assert len(stub.requests) == 10
        # labelled results stay the cached results of the config without a judge
        assert main(locomo) == 0
        assert judge(run_dir, stub.url) == 0
        assert len(stub.requests) == 10
    report = load_report(run_dir / "report.json")
    assert (report.summary.overall.judged, report.summary.overall.j) == (10, 0.1)
    assert answers(run_dir) == generated


class DiesAfter(ScriptedBackend):
    """A judge server that answers ``n`` requests and then goes down."""

    def __init__(self, n: int) -> None:
        super().__init__(*[CORRECT] * n)
        self.n = n

    def chat(self, *args, **kwargs):
        self.down = len(self.requests) >= self.n
        return super().chat(*args, **kwargs)


def test_a_failing_judge_raises_its_typed_error_and_leaves_every_file_as_it_was(run_dir, capsys):
    before = files(run_dir)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert judge(run_dir, dead) == 2
    assert capsys.readouterr().err.startswith("memsdk: error: POST /v1/chat/completions: ConnectError")
    assert files(run_dir) == before

    # down half-way through a conversation: its file is replaced only once it is fully labelled
    with pytest.raises(PolicyUnavailable):
        judge_run(run_dir, Judge(DiesAfter(4)), progress=False)
    assert files(run_dir) == before
    # and a rerun against a live judge finishes the job
    assert judge_run(run_dir, Judge(ScriptedBackend(*[CORRECT] * 10)), progress=False).asked == 10


def test_a_folder_without_results_is_refused_in_one_line(tmp_path, capsys):
    assert judge(tmp_path, "http://127.0.0.1:9") == 2
    err = capsys.readouterr().err
    assert err.startswith("memsdk: error: run_dir: no conversation results in") and "eval locomo" in err
