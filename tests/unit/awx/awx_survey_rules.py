"""AWX's survey rules, restated for tests (not shipped).

Two checks, as AWX makes them (ansible/awx):
- saving a survey spec (awx/api/views JobTemplateSurveySpec._validate_spec_data): name and
  description strings, a non-empty spec list, each question with string type/question_name/variable
  and a bool `required`, unique variables, a known type, a default of the type's Python type,
  integer-or-null min/max, choices for choice types, one default for multiplechoice, defaults
  among the choices;
- launching (awx/main/models/mixins.py SurveyJobTemplateMixin._survey_element_validation): an
  integer answer must be exactly an int ("5", 5.0 and True are refused), text answers strings within
  min/max length, choice answers among the choices, required answers present.
Messages follow AWX's wording so a failure here reads like AWX's.
"""

ALLOWED_TYPES = {
    "text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
    "integer": int, "float": float,
}


def _choices(item):
    choices = item.get("choices")
    if isinstance(choices, str):
        return [c for c in choices.splitlines() if c.strip()]
    return list(choices or [])


def spec_errors(spec):
    """The first error AWX answers with HTTP 400 when this spec is saved, or None."""
    for field, kind, label in (("name", str, "string"), ("description", str, "string"),
                               ("spec", list, "list of items")):
        if field not in spec:
            return "Field '%s' is missing from survey spec." % field
        if not isinstance(spec[field], kind):
            return "Expected %s for field '%s', received %s type." % (label, field, type(spec[field]).__name__)
    if not spec["spec"]:
        return "'spec' doesn't contain any items."
    seen = set()
    for idx, item in enumerate(spec["spec"]):
        if not isinstance(item, dict):
            return "Survey question %s is not a json object." % idx
        for field in ("type", "question_name", "variable", "required"):
            if field not in item:
                return "'%s' missing from survey question %s" % (field, idx)
            kind, label = (bool, "boolean") if field == "required" else (str, "string")
            if not isinstance(item[field], kind):
                return "'%s' in survey question %s expected to be %s." % (field, idx, label)
        if item["variable"] in seen:
            return "'variable' '%s' duplicated in survey question %s." % (item["variable"], idx)
        seen.add(item["variable"])
        qtype = item["type"]
        if qtype not in ALLOWED_TYPES:
            return "'%s' in survey question %s is not one of '%s' allowed question types." % (
                qtype, idx, ", ".join(ALLOWED_TYPES))
        default = item.get("default", "")
        if default != "" and not isinstance(default, ALLOWED_TYPES[qtype]):
            label = qtype if qtype in ("integer", "float") else "string"
            return "Default value %s in survey question %s expected to be %s." % (default, idx, label)
        for key in ("min", "max"):
            if key in item and item[key] is not None and (
                    not isinstance(item[key], int) or isinstance(item[key], bool)):
                return "The %s limit in survey question %s expected to be integer." % (key, idx)
        if qtype in ("multiplechoice", "multiselect"):
            if "choices" not in item:
                return "Survey question %s of type %s must specify choices." % (idx, qtype)
            if "default" in item:
                defaults = [d for d in default.splitlines() if d.strip()] if isinstance(default, str) else default
                if qtype == "multiplechoice" and len(defaults) > 1:
                    return "Multiple Choice (Single Select) can only have one default value."
                if any(d not in _choices(item) for d in defaults):
                    return "Default choice must be answered from the choices listed."
    return None


def answer_errors(spec, answers):
    """The errors AWX gives when a job is launched with these survey answers."""
    errors = []
    for item in spec["spec"]:
        var = item["variable"]
        if var not in answers:
            if item["required"]:
                errors.append("'%s' value missing" % var)
            continue
        value, qtype = answers[var], item["type"]
        low, high = item.get("min"), item.get("max")
        if qtype in ("text", "textarea", "password"):
            if not isinstance(value, str):
                errors.append("Value %s for '%s' expected to be a string." % (value, var))
                continue
            if low not in ("", None) and len(value) < int(low):
                errors.append("'%s' value %s is too small (length is %s must be at least %s)." % (
                    var, value, len(value), low))
            if high not in ("", None) and len(value) > int(high):
                errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, high))
        elif qtype == "integer":
            if isinstance(value, bool) or not isinstance(value, int):  # AWX compares the exact type
                errors.append("Value %s for '%s' expected to be an integer." % (value, var))
                continue
            if low not in ("", None) and value < int(low):
                errors.append("'%s' value %s is too small (must be at least %s)." % (var, value, low))
            if high not in ("", None) and value > int(high):
                errors.append("'%s' value %s is too large (must be no more than %s)." % (var, value, high))
        elif qtype == "float":
            if type(value) not in (float, int):  # noqa: E721
                errors.append("Value %s for '%s' expected to be a numeric type." % (value, var))
        elif qtype == "multiplechoice":
            if value not in _choices(item):
                errors.append("Value %s for '%s' expected to be one of %s." % (value, var, _choices(item)))
        elif qtype == "multiselect":
            if not isinstance(value, list):
                errors.append("'%s' value is expected to be a list." % var)
            else:
                errors.extend("Value %s for '%s' expected to be one of %s." % (v, var, _choices(item))
                              for v in value if v not in _choices(item))
    return errors
