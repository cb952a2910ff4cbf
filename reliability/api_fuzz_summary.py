"""Summary of a `make api-fuzz` run from schemathesis' NDJSON report (standard library only).

Prints, per operation, the statuses its positive and negative cases got, and fails (exit 1)
when an operation does not reach its handler: it never answered 2xx, or more than a tenth of
its positive (schema-valid) cases got 404, which means the generated ids do not exist in the
workspace the server runs with.

Usage: python3 reliability/api_fuzz_summary.py target/api-fuzz/run.ndjson
"""

import collections
import json
import sys

MAX_POSITIVE_404_SHARE = 0.1


def main(path):
    statuses = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    with open(path, encoding="utf-8") as f:
        for line in f:
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished["recorder"]
            cases = recorder.get("cases", {})
            for case_id, interaction in recorder.get("interactions", {}).items():
                response = interaction.get("response")
                if response is None:
                    continue
                meta = cases.get(case_id, {}).get("value", {}).get("meta") or {}
                mode = meta.get("generation", {}).get("mode", "unknown")
                statuses[recorder["label"]][mode][response["status_code"]] += 1
    failed = []
    for operation in sorted(statuses):
        by_mode = statuses[operation]
        print(operation)
        for mode in sorted(by_mode):
            counts = ", ".join(f"{status}: {n}" for status, n in sorted(by_mode[mode].items()))
            print(f"  {mode:8} {sum(by_mode[mode].values()):5} cases  {counts}")
        every = collections.Counter()
        for counts in by_mode.values():
            every.update(counts)
        if not any(200 <= status < 300 for status in every):
            failed.append(f"{operation}: no 2xx response")
        positive = by_mode.get("positive", collections.Counter())
        total = sum(positive.values())
        if total and positive[404] > MAX_POSITIVE_404_SHARE * total:
            failed.append(f"{operation}: {positive[404]} of {total} positive cases got 404")
    for failure in failed:
        print(f"not reaching the handler: {failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
