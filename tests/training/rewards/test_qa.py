import math

import pytest

from memsdk_training.rewards.qa import QA_METRICS, bleu1, exact_match, mean_qa_score, normalize_answer, token_f1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cat, sat on A mat!", "cat sat on mat"),
        ("an apple and the pear", "apple and pear"),  # "and" stays (LoCoMo would drop it)
        ("theatre  at\tthe\nend", "theatre at end"),  # articles only as whole words
        (2022, "2022"),  # LoCoMo stores some answers as ints
        ("", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_ignores_case_punctuation_and_articles():
    assert exact_match("The Eiffel Tower", "eiffel tower.") == 1.0
    assert exact_match("Eiffel Tower in Paris", "eiffel tower") == 0.0


def test_token_f1_partial_overlap():
    # pred tokens [in, park, with, buddy], gold [buddy, park]: P = 2/4, R = 2/2
    assert token_f1("in the park with Buddy", "Buddy park") == pytest.approx(2 / 3, abs=1e-9)


def test_token_f1_counts_repeated_tokens_once_per_gold_token():
    # common = 1 dog; P = 1/3, R = 1/2, F1 = 2 * (1/6) / (5/6)
    assert token_f1("dog dog dog", "dog cat") == pytest.approx(0.4, abs=1e-9)


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [("", "", 1.0), ("the", "", 1.0), ("a", "dog", 0.0), ("dog", "", 0.0)],
)
def test_token_f1_empty_after_normalisation(pred, gold, expected):
    assert token_f1(pred, gold) == expected


def test_token_f1_int_gold():
    assert token_f1("in 2022", 2022) == pytest.approx(2 / 3, abs=1e-9)


def test_bleu1_brevity_penalty_for_short_prediction():
    # c = 3, r = 5, all 3 unigrams match: p1 = 1, BP = exp(1 - 5/3)
    assert bleu1("went to Paris", "went to Paris in May") == pytest.approx(math.exp(-2 / 3), abs=1e-9)


def test_bleu1_long_prediction_has_no_brevity_penalty():
    assert bleu1("she went to Paris yesterday", "Paris") == pytest.approx(0.2, abs=1e-9)


def test_bleu1_equal_length_has_unit_brevity_penalty():
    assert bleu1("red car", "blue car") == pytest.approx(0.5, abs=1e-9)


def test_bleu1_clips_repeated_unigrams():
    # normalised pred [cat, cat, cat], gold [cat, sat]: 1 clipped match of 3, c > r
    assert bleu1("the cat cat cat", "cat sat") == pytest.approx(1 / 3, abs=1e-9)


def test_bleu1_no_match_is_zero_not_smoothed():
    # nltk method1 would only apply after nltk's own early return of 0 for N = 1
    assert bleu1("London", "Paris") == 0.0


def test_bleu1_empty_inputs():
    assert bleu1("", "Paris") == 0.0
    assert bleu1("Paris", "") == 0.0
    assert bleu1("the", "") == 1.0


_QUESTIONS = [("in the park with Buddy", "Buddy park"), ("Paris", "paris"), ("dog", "cat")]


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("f1", (2 / 3 + 1 + 0) / 3),  # F1 per question: 2/3 (see above), 1, 0
        ("em", (0 + 1 + 0) / 3),
    ],
)
def test_mean_qa_score_over_a_question_set(metric, expected):
    scores = [QA_METRICS[metric](pred, gold) for pred, gold in _QUESTIONS]
    assert mean_qa_score(scores) == pytest.approx(expected, abs=1e-12)


def test_mean_qa_score_without_questions_is_zero():
    assert mean_qa_score([]) == 0.0
