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
