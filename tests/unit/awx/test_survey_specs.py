"""The AWX survey specs we ship pass AWX's own rules; broken copies and wrong answers do not."""

import copy
import glob
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from awx_survey_rules import answer_errors, spec_errors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPECS = sorted(glob.glob(os.path.join(REPO, "awx", "*.survey.json")))
QUOTA = os.path.join(REPO, "awx", "quota_increase.survey.json")


def load(path):
    with open(path) as handle:
        return json.load(handle)


def item(spec, variable):
    return next(q for q in spec["spec"] if q["variable"] == variable)


@pytest.mark.parametrize("path", SPECS, ids=os.path.basename)
def test_shipped_specs_are_accepted_by_awx(path):
    assert spec_errors(load(path)) is None


def _break(mutate):
    spec = load(QUOTA)
    mutate(spec)
    return spec


BROKEN = {
    "no name": (lambda s: s.pop("name"), "Field 'name' is missing from survey spec."),
    "empty spec": (lambda s: s.update(spec=[]), "'spec' doesn't contain any items."),
    "required as string": (lambda s: item(s, "quota_team").update(required="yes"),
                           "'required' in survey question 0 expected to be boolean."),
    "min as string": (lambda s: item(s, "quota_ticket").update(min="3"),
                      "The min limit in survey question 3 expected to be integer."),
    "max as float": (lambda s: item(s, "quota_value").update(max=10.5),
                     "The max limit in survey question 2 expected to be integer."),
    "integer default as string": (lambda s: item(s, "quota_value").update(default="4"),
                                  "Default value 4 in survey question 2 expected to be integer."),
    "default not a choice": (lambda s: item(s, "quota_resource").update(default="limits.nvidia.com/gpu"),
                             "Default choice must be answered from the choices listed."),
    "two defaults": (lambda s: item(s, "quota_force").update(default="false\ntrue"),
                     "Multiple Choice (Single Select) can only have one default value."),
    "no choices": (lambda s: item(s, "quota_resource").pop("choices"),
                   "Survey question 1 of type multiplechoice must specify choices."),
    "duplicate variable": (lambda s: item(s, "quota_ticket").update(variable="quota_team"),
                           "'variable' 'quota_team' duplicated in survey question 3."),
    "unknown type": (lambda s: item(s, "quota_force").update(type="boolean"),
                     "'boolean' in survey question 4 is not one of"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_copies_are_refused(case):
    mutate, message = BROKEN[case]
    error = spec_errors(_break(mutate))
    assert error is not None and error.startswith(message), error


def good_answers():
    return {"quota_team": "team-a", "quota_resource": "requests.nvidia.com/gpu", "quota_value": 12,
            "quota_ticket": "CHG-1234", "quota_force": "false"}


def test_survey_answers_pass_and_reach_the_playbook_typed():
    answers = good_answers()
    assert answer_errors(load(QUOTA), answers) == []
    assert isinstance(answers["quota_value"], int) and isinstance(answers["quota_resource"], str)


@pytest.mark.parametrize("value,message", [
    ("5", "Value 5 for 'quota_value' expected to be an integer."),
    (5.0, "Value 5.0 for 'quota_value' expected to be an integer."),
    (True, "Value True for 'quota_value' expected to be an integer."),
    (-1, "'quota_value' value -1 is too small (must be at least 0)."),
])
def test_integer_question_refuses_what_awx_refuses(value, message):
    answers = good_answers()
    answers["quota_value"] = value
    assert answer_errors(load(QUOTA), answers) == [message]


def test_choice_length_and_required_rules():
    answers = good_answers()
    answers.update(quota_resource="limits.nvidia.com/gpu", quota_ticket="ab")
    del answers["quota_team"]
    errors = answer_errors(load(QUOTA), answers)
    assert "'quota_team' value missing" in errors
    assert any(e.startswith("Value limits.nvidia.com/gpu for 'quota_resource' expected to be one of") for e in errors)
    assert "'quota_ticket' value ab is too small (length is 2 must be at least 3)." in errors


def test_spec_rules_do_not_mutate_input():
    spec = load(QUOTA)
    before = copy.deepcopy(spec)
    spec_errors(spec)
    assert spec == before
