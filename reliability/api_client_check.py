"""Resolve and events through the client openapi-python-client generated from docs/openapi.json
(reliability/api-client.sh): typed requests, typed answers, and the events stored once.

Arguments: the API's base URL, the `flowgate demo --json` output (app and key), the SQLite file
the server writes.
"""

import datetime
import json
import sqlite3
import sys
import typing
import uuid

from flowgate_client import AuthenticatedClient
from flowgate_client.api.default import resolve, send_events
from flowgate_client.models import (
    EventInput,
    EventInputDevicePlatform,
    EventInputEventType,
    EventsAccepted,
    ResolveRequest,
    ResolveRequestDevicePlatform,
    ResolveResult,
)


def main(base_url, demo_file, database):
    # The generated operation types its body as the document says: one event or a list.
    body_type = send_events.sync_detailed.__annotations__["body"]
    assert typing.get_args(body_type) == (EventInput, list[EventInput]), body_type

    demo = json.load(open(demo_file))
    app = uuid.UUID(demo["app_id"])
    client = AuthenticatedClient(base_url=base_url, token=demo["key"])

    answer = resolve.sync_detailed(
        app_id=app,
        placement_id="paywall",
        client=client,
        body=ResolveRequest(
            user_id="typed-user",
            session_id="typed-session",
            device_platform=ResolveRequestDevicePlatform.IOS,
        ),
    )
    assert answer.status_code == 200, (answer.status_code, answer.content)
    flow = answer.parsed
    assert isinstance(flow, ResolveResult), flow
    print(f"resolve: flow {flow.flow_id}, version {flow.flow_version_id}")

    now = datetime.datetime.now(datetime.timezone.utc)

    def event(event_type, timestamp=now):
        return EventInput(
            event_id=uuid.uuid4(),
            app_id=app,
            flow_id=flow.flow_id,
            flow_version_id=flow.flow_version_id,
            user_id="typed-user",
            session_id="typed-session",
            device_platform=EventInputDevicePlatform.IOS,
            event_type=event_type,
            timestamp=timestamp,
            sdk_version="openapi-python-client",
        )

    # One event, then an array of two; then an array whose second event is too old: the
    # request is still a 202, that event is counted in `rejected` with its error.
    single = event(EventInputEventType.FLOW_OPEN)
    pair = [event(EventInputEventType.SCREEN_VIEW), event(EventInputEventType.FLOW_COMPLETE)]
    stale = event(EventInputEventType.FLOW_DISMISS, now - datetime.timedelta(days=40))
    mixed = [event(EventInputEventType.SCREEN_VIEW), stale]
    expected = {1: (1, 0), 2: (2, 0), 3: (1, 1)}
    for n, body in enumerate([single, pair, mixed], start=1):
        answer = send_events.sync_detailed(app_id=app, client=client, body=body)
        assert answer.status_code == 202, (answer.status_code, answer.content)
        accepted = answer.parsed
        assert isinstance(accepted, EventsAccepted), accepted
        assert (accepted.accepted, accepted.rejected) == expected[n], answer.content
    assert accepted.errors[0].index == 1, answer.content
    print(f"events: typed bodies accepted; the stale one rejected ({accepted.errors[0].code})")

    sent = [single.event_id, *[e.event_id for e in pair], mixed[0].event_id]
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT event_id FROM analytics_events WHERE user_id = 'typed-user'"
        ).fetchall()
    stored = sorted(str(uuid.UUID(bytes=r[0]) if isinstance(r[0], bytes) else r[0]) for r in rows)
    assert stored == sorted(str(i) for i in sent), (stored, sent)
    print(f"stored: the {len(sent)} accepted events, once each")


if __name__ == "__main__":
    main(*sys.argv[1:])
