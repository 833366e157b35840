"""`memsdk.llm.inprocess`, the rendering and stop handling serving and training share, on a
hand-made tokenizer whose pieces make every case easy to read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from memsdk.llm.inprocess import Finished, StopOnText, finish, first_stop, render

PIECES = ["<end>", "Bud", "dy", " has", ' "', "Sc", "out", '"', "]}", "EN", "D"]
END = 0
ID = {p: i for i, p in enumerate(PIECES)}


class PieceTokenizer:
    """Token i is PIECES[i]; the end token is special (dropped when decoding skips specials)."""

    eos_token_id = END

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return "".join(PIECES[i] for i in ids if not (skip_special_tokens and i == END))

    def batch_decode(self, rows: Any, skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(row.tolist(), skip_special_tokens) for row in rows]

    def apply_chat_template(self, messages: list[dict[str, str]], *, tokenize: bool, add_generation_prompt: bool) -> str:
        text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


TOK = PieceTokenizer()


def ids(*pieces: str) -> list[int]:
    return [ID[p] for p in pieces]


def test_a_final_assistant_message_is_a_response_prefix() -> None:
    user = {"role": "user", "content": "hi"}
    assert render(TOK, [user]) == "<user>hi</user><assistant>"
    assert render(TOK, [user, {"role": "assistant", "content": '{"facts": ["'}]) == '<user>hi</user><assistant>{"facts": ["'


def test_first_stop_is_the_earliest_of_all_stop_strings() -> None:
    assert first_stop("a]}b\"c", ['"', "]}"]) == 1
    assert first_stop("abc", ['"']) is None
    assert first_stop("abc", [""]) is None  # an empty stop string would end every reply at once


@pytest.mark.parametrize(
    ("row", "stop", "expected"),
    [
        # a sampled end token ends the row and stays; generate's padding after it goes
        (ids("Bud", "dy", "<end>", "<end>"), (), Finished(ids("Bud", "dy", "<end>"), "Buddy", "stop")),
        (ids("Bud", "dy", " has"), (), Finished(ids("Bud", "dy", " has"), "Buddy has", "length")),
        # a stop string ends the text where it starts and the ids at the token that completed it
        (ids("Sc", "out", '"', "]}"), ('"',), Finished(ids("Sc", "out", '"'), "Scout", "stop")),
        (ids("Bud", "EN", "D", " has"), ("END",), Finished(ids("Bud", "EN", "D"), "Bud", "stop")),
        (ids("Bud", ' "', "Sc"), ('"',), Finished(ids("Bud", ' "'), "Bud ", "stop")),
        # SmolLM2 pads a row stopped by a stop string with its end token: that pad was never sampled
        (ids("Sc", "out", '"', "<end>", "<end>"), ('"',), Finished(ids("Sc", "out", '"'), "Scout", "stop")),
    ],
)
def test_finish(row: list[int], stop: tuple[str, ...], expected: Finished) -> None:
    assert finish(TOK, row, stop) == expected


def test_stop_on_text_stops_the_rows_whose_reply_holds_a_stop_string() -> None:
    import torch

    prompt = [ID["Sc"], ID["out"], ID['"']]  # a stop string in the prompt must not count
    rows = torch.tensor([prompt + ids("Bud", "dy"), prompt + ids("Sc", '"'), prompt + ids("Bud", "EN"), prompt + ids("EN", "D")])
    done = StopOnText(TOK, len(prompt), ['"', "END"])(rows, None)
    assert done.tolist() == [False, True, False, True]
