"""The release gate on a running client: a better version is promoted, a worse or equal one
is kept out, a forced promotion is recorded, and watching clients follow the audit trail
only. The scripted backend answers with the name of the model a request was routed to, so
which version "knows" the gold answer is fixed by construction."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from memsdk import AsyncMemoryClient, GateFailed, InvalidInput
from memsdk.cli import main as cli
from memsdk.embedding import HashEmbedder

from .test_policy_swap import AdapterBackend, async_twin, publish


def states(path: Path, gold: str, n: int = 12) -> Path:
    path.write_text("".join(json.dumps({"question": f"who answers question {i}?", "memories": [f"memory {i}", "another memory"], "gold": gold}) + "\n" for i in range(n)))
    return path


@pytest.fixture
def gated(make_client, tmp_path):
    backend = AdapterBackend()
    ckpt = tmp_path / "ckpt"
    client = make_client(backend=backend, checkpoint_dir=ckpt)
    for version in ("good", "bad"):
        publish(ckpt, "answerer", version)
    # the gold is what the "good" adapter says: good scores 1 on every state, base and bad 0
    return client, backend, ckpt, states(tmp_path / "states.jsonl", "answerer-good")


def test_a_better_version_passes_is_recorded_and_serves(gated) -> None:
    client, _, ckpt, on = gated
    decision = client.promote("answerer", "good", on=on)
    assert decision is not None and decision.passed
    assert (decision.paired.wins, decision.paired.ties, decision.paired.losses) == (12, 0, 0)
    assert decision.candidate.mean == 1.0 and decision.incumbent.version == "base"
    assert decision.candidate.metrics == {"em": 1.0, "bleu1": 1.0} and decision.incumbent.metrics == {"em": 0.0, "bleu1": 0.0}  # reported beside F1
    assert client.policies["answerer"].version == "good"
    assert client.registry.decision("answerer", "good") == decision  # beside the manifest
    [trail] = client.registry.promotions("answerer")
    assert (trail.version, trail.against, trail.forced) == ("good", "base", False) and trail.reason.startswith("PASS")


def test_a_version_no_better_or_worse_is_kept_out(gated) -> None:
    client, _, _, on = gated
    with pytest.raises(GateFailed, match="not above the margin") as failed:
        client.promote("answerer", "bad", on=on)  # 0 against base's 0: a tie
    assert failed.value.decision.paired.ties == 12
    assert client.policies["answerer"].version == "base" and client.registry.promotions("answerer") == []
    client.promote("answerer", "good", on=on)
    with pytest.raises(GateFailed):
        client.promote("answerer", "bad", on=on)  # now worse than the incumbent on every state
    assert client.policies["answerer"].version == "good"
    assert client.registry.decision("answerer", "bad").paired.losses == 12  # the failure is recorded too


def test_evaluate_switches_nothing_and_force_is_audited(gated) -> None:
    client, _, _, on = gated
    decision = client.evaluate_policy("answerer", "bad", against="good", on=on)
    assert not decision.passed and client.policies["answerer"].version == "base"
    assert client.promote("answerer", "bad", force=True) is None
    [trail] = client.registry.promotions("answerer")
    assert trail.forced and trail.version == "bad" and "forced" in trail.reason
    assert client.policies["answerer"].version == "bad"


def test_watchers_follow_promotions_not_publications(gated, make_client) -> None:
    client, backend, ckpt, on = gated
    watcher = make_client(backend=backend, checkpoint_dir=ckpt, data_dir=ckpt.parent / "other")
    watcher.watch_policies(interval_s=0.05)
    time.sleep(0.3)
    assert watcher.policies["answerer"].version == "base"  # two published versions, none promoted
    client.promote("answerer", "good", on=on)
    deadline = time.time() + 5
    while watcher.policies["answerer"].version != "good" and time.time() < deadline:
        time.sleep(0.05)
    assert watcher.policies["answerer"].version == "good"


def test_answerer_states_are_validated(gated, tmp_path) -> None:
    client, _, _, on = gated
    with pytest.raises(InvalidInput, match="app's own traffic"):  # the manager's gate: tests/client/test_gate_manager.py
        client.evaluate_policy("manager", "v1", on=on)
    with pytest.raises(InvalidInput, match="locomo-val"):
        client.evaluate_policy("answerer", "good", on=tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"question": "q", "memories": "not a list", "gold": "g"}\n')
    with pytest.raises(InvalidInput, match="bad.jsonl:1.memories"):
        client.evaluate_policy("answerer", "good", on=tmp_path / "bad.jsonl")


@pytest.mark.slow  # the CLI's client loads MiniLM
def test_the_cli_shows_decisions_and_fails_a_failing_gate(tmp_path, capsys, monkeypatch) -> None:
    import memsdk.client.sync as sync

    data_dir = tmp_path / "cli"
    for version in ("good", "bad"):
        publish(data_dir / "checkpoints", "answerer", version)
    on = states(tmp_path / "states.jsonl", "answerer-good")
    # the CLI builds its own client on the in-process default backend: give it the scripted one,
    # and no packaged adapter (a client that makes its SmolLM2 backend would start on it: base is the incumbent here)
    import memsdk.client._base as base_module

    monkeypatch.setattr(sync.MemoryClient, "_make_backend", lambda self, endpoint: AdapterBackend())
    monkeypatch.setattr(base_module, "PACKAGED_DIR", tmp_path / "no-packaged-adapters")
    base = ["--data-dir", str(data_dir)]
    assert cli([*base, "policies", "evaluate", "answerer", "bad", "--on", str(on)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["passed"] is False and shown["paired"]["ties"] == 12
    assert cli([*base, "policies", "promote", "answerer", "bad", "--on", str(on)]) == 2
    assert "FAIL answerer bad vs base" in capsys.readouterr().err
    assert cli([*base, "policies", "promote", "answerer", "good", "--on", str(on)]) == 0
    assert json.loads(capsys.readouterr().out)["active"]["answerer"]["version"] == "good"
    assert cli([*base, "policies"]) == 0
    listing = json.loads(capsys.readouterr().out)["answerer"]
    assert listing["version"] == "good" and listing["gate"]["good"].startswith("PASS") and listing["gate"]["bad"].startswith("FAIL")
    assert [p["version"] for p in listing["promotions"]] == ["good"]


def test_the_async_twin_gates_the_same_way(tmp_path) -> None:
    AsyncAdapter = async_twin(AdapterBackend)
    ckpt = tmp_path / "ckpt"
    for version in ("good", "bad"):
        publish(ckpt, "answerer", version)
    on = states(tmp_path / "states.jsonl", "answerer-good")

    async def main() -> None:
        async with AsyncMemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(64), backend=AsyncAdapter(), checkpoint_dir=ckpt) as client:
            with pytest.raises(GateFailed):
                await client.promote("answerer", "bad", on=on)
            decision = await client.promote("answerer", "good", on=on)
            assert decision is not None and decision.passed and client.policies["answerer"].version == "good"

    asyncio.run(main())


def test_the_log_replays_the_answers_users_judged_as_they_were_shown(gated) -> None:
    """``on="log"``: each answer given a gold (or called correct) is a state, its memories as
    they stood when it was asked; an answer only called wrong has no gold and is no state."""
    from memsdk.gate import log_answer_cases

    client, _, _, _ = gated
    sam = {"user_id": "sam"}
    dog = client.add("Sam has a dog named Rex", scope=sam)
    client.add("Sam lives in Lisbon", scope=sam)
    judged = []
    for i in range(6):
        a = client.answer(f"what is the name of Sam's dog ({i})?", scope=sam)
        client.feedback(a.trajectory_id, gold="answerer-good")
        judged.append(a.trajectory_id)
    client.feedback(client.answer("anything else?", scope=sam).trajectory_id, correct=False)
    client.update(dog.id, "Sam has a cat named Tom", scope=sam)  # after the answers: no state changes
    client.delete(dog.id, scope=sam)

    cases = log_answer_cases(client.log, client.bank)
    assert [c.key for c in cases] == [f"log/{i}" for i in judged]
    assert all(c.gold == "answerer-good" for c in cases)
    assert all("Sam has a dog named Rex" in [m.record.text for m in c.memories] for c in cases)

    decision = client.promote("answerer", "good", on="log")
    assert decision is not None and decision.passed and decision.on == "log" and decision.paired.wins == 6
    with pytest.raises(GateFailed):
        client.promote("answerer", "bad", on=cases[:3])  # the states themselves, as a trainer passes its held-out part
    assert client.registry.decision("answerer", "bad").on == "3 given states"


def test_a_log_without_judged_answers_is_a_clear_error(make_client, tmp_path) -> None:
    from .test_policy_swap import AdapterBackend

    client = make_client(backend=AdapterBackend(), checkpoint_dir=tmp_path / "ckpt", data_dir=tmp_path / "empty")
    publish(tmp_path / "ckpt", "answerer", "good")
    with pytest.raises(InvalidInput, match="no judged answer"):
        client.evaluate_policy("answerer", "good", on="log")
    with pytest.raises(InvalidInput, match="AnswerCase"):
        client.evaluate_policy("answerer", "good", on=["not a state"])


def test_locomo_val_states_show_the_candidate_the_memories_it_would_serve_with(make_client, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memsdk.gate.release as release

    asked: list[int] = []

    def cases(embedder, *, split: str, k: int, manager) -> list:
        assert manager is None  # the heuristic one: the bank this client's own manager would leave
        asked.append(k)
        return release.load_answer_cases(states(tmp_path / "states.jsonl", "answerer-k4", n=3))

    monkeypatch.setattr(release, "locomo_answer_cases", cases)  # LoCoMo's states, without LoCoMo
    ckpt = tmp_path / "ckpt"
    publish(ckpt, "answerer", "k4", config={"answer_k": 4})
    publish(ckpt, "answerer", "plain")
    client = make_client(backend=AdapterBackend(), checkpoint_dir=ckpt)
    client.evaluate_policy("answerer", "k4", on="locomo-val")  # its training k, for both sides
    client.evaluate_policy("answerer", "plain", on="locomo-val")  # none recorded: the client's
    client.evaluate_policy("answerer", "k4", on="locomo-val", k=7)  # asked for
    client.close()
    pinned = make_client(backend=AdapterBackend(), checkpoint_dir=ckpt, answer_k=6)
    pinned.evaluate_policy("answerer", "k4", on="locomo-val")  # the app's own k is what it would serve with
    assert asked == [4, 60, 7, 6]
