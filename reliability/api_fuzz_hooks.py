"""schemathesis hooks of `make api-fuzz` (reliability/api-fuzz.sh).

The fuzzing phase draws app ids and placement keys from the dictionaries of
reliability/schemathesis.toml (the workspace of reliability/api-fuzz-catalog.json). The
coverage and examples phases do not use dictionaries: they take a parameter's or property's
`examples`. This hook adds the same values as `examples` to the document as loaded for the run
(the committed docs/openapi.json is not changed), so those phases reach the handlers too
instead of answering every case with 404 `app_not_found`.
"""

import os
import tomllib

import schemathesis

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemathesis.toml")


def _dictionaries():
    with open(CONFIG, "rb") as f:
        dictionaries = tomllib.load(f)["dictionaries"]
    return dictionaries["apps"]["values"], dictionaries["placements"]["values"]


@schemathesis.hook
def before_load_schema(context, raw_schema):
    apps, placements = _dictionaries()
    by_name = {"appId": apps, "placementId": placements}
    for item in raw_schema.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                values = by_name.get(parameter.get("name"))
                if values and parameter.get("in") == "path":
                    parameter["schema"]["examples"] = list(values)
    schemas = raw_schema["components"]["schemas"]
    schemas["LegacyResolveRequest"]["properties"]["app_id"]["examples"] = list(apps)
    schemas["BatchRequest"]["properties"]["placement_keys"]["items"]["examples"] = list(placements)


# The events operations: a body that breaks EventInput's rules is not refused (D7, the
# document's EventBody): the request is answered 202 and the invalid events are counted in
# `rejected`. schemathesis.toml lets their negative cases have that 202; this check makes sure
# it means what the document says.
EVENT_PATHS = ("/v1/apps/{appId}/events", "/v1/events")
DOCUMENT = os.path.join(os.path.dirname(CONFIG), os.pardir, "docs", "openapi.json")


def _event_validator():
    import json

    import jsonschema_rs

    with open(DOCUMENT, encoding="utf-8") as f:
        document = json.load(f)
    # The document as the root, so that EventInput's references resolve in it.
    document["$ref"] = "#/components/schemas/EventInput"
    return jsonschema_rs.Draft202012Validator(document)


_EVENT_VALIDATOR = None


@schemathesis.check
def events_count_every_event(ctx, response, case):
    """A 202 to an events request accounts for each event: `accepted + rejected` is the number
    sent, and every event that breaks EventInput's rules is among the rejected."""
    global _EVENT_VALIDATOR
    if case.operation.path not in EVENT_PATHS or response.status_code != 202:
        return None
    if _EVENT_VALIDATOR is None:
        _EVENT_VALIDATOR = _event_validator()
    events = case.body if isinstance(case.body, list) else [case.body]
    answer = response.json()
    if answer["accepted"] + answer["rejected"] != len(events):
        raise AssertionError(
            f"{len(events)} events sent, {answer['accepted']} accepted and "
            f"{answer['rejected']} rejected"
        )
    invalid = sum(1 for event in events if not _EVENT_VALIDATOR.is_valid(event))
    if answer["rejected"] < invalid:
        raise AssertionError(
            f"{invalid} of the {len(events)} events break EventInput's rules, but only "
            f"{answer['rejected']} were rejected: {answer}"
        )
    return None
