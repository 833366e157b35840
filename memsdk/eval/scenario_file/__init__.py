"""Scenario files: an app's own memory tests (``memsdk eval scenarios FILE``)."""

from memsdk.eval.scenario_file.judging import answer_contains, check_records, class_rows, scenario_class
from memsdk.eval.scenario_file.models import ScenarioFile, ScenarioFileReport

__all__ = ["ScenarioFile", "ScenarioFileReport", "answer_contains", "check_records", "class_rows", "scenario_class"]
