//! The columns of `analytics_events` the store writes, in one table ([`EVENT_COLUMNS`]) that
//! drives every event write: the PostgreSQL `COPY` (`copy.rs`), the PostgreSQL `UNNEST` insert
//! and the SQLite insert (`events.rs`). A new column is one entry here (and the migrations); a
//! test holds the list to the columns the domain's event field table names
//! (`flowgate_domain::events::EVENT_FIELDS`).

use flowgate_domain::events::AnalyticsEvent;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::types::{DbJsonObject, DbTimestamp, DbUuid};

/// One column: its name and how its value is taken from an event.
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) take: Take,
}

impl Column {
    const fn new(name: &'static str, take: Take) -> Column {
        Column { name, take }
    }
}

/// How a column's value is taken from an event; the variant is the column's type (`None` is
/// SQL `NULL`).
#[derive(Clone, Copy)]
pub(crate) enum Take {
    Uuid(fn(&AnalyticsEvent) -> Option<uuid::Uuid>),
    Text(fn(&AnalyticsEvent) -> Option<&str>),
    Instant(fn(&AnalyticsEvent) -> OffsetDateTime),
    Json(fn(&AnalyticsEvent) -> &Map<String, Value>),
}

/// Every column of `analytics_events` but `received_at`, which keeps its default (`now()`), in
/// the order the writes list them.
pub(crate) const EVENT_COLUMNS: [Column; 17] = [
    Column::new("event_id", Take::Uuid(|e| Some(e.event_id.0))),
    Column::new("source", Take::Text(|e| Some(e.source.as_str()))),
    Column::new("event_type", Take::Text(|e| Some(e.event_type.as_str()))),
    Column::new("app_id", Take::Uuid(|e| Some(e.app_id.0))),
    Column::new("flow_id", Take::Uuid(|e| e.flow_id.map(|f| f.0))),
    Column::new(
        "flow_version_id",
        Take::Uuid(|e| e.flow_version_id.map(|v| v.0)),
    ),
    Column::new("placement_key", Take::Text(|e| e.placement_key.as_deref())),
    Column::new("user_id", Take::Text(|e| Some(&e.user_id))),
    Column::new("session_id", Take::Text(|e| Some(&e.session_id))),
    Column::new(
        "device_platform",
        Take::Text(|e| Some(e.device_platform.as_str())),
    ),
    Column::new("occurred_at", Take::Instant(|e| e.occurred_at)),
    Column::new("sdk_version", Take::Text(|e| e.sdk_version.as_deref())),
    Column::new("experiment_id", Take::Text(|e| e.experiment_id.as_deref())),
    Column::new("variant_id", Take::Text(|e| e.variant_id.as_deref())),
    Column::new("variant_name", Take::Text(|e| e.variant_name.as_deref())),
    Column::new("reason", Take::Text(|e| e.reason.map(|r| r.as_str()))),
    Column::new("payload", Take::Json(|e| &e.payload)),
];

/// `event_id, source, ...`: the column list of the writes' SQL.
pub(crate) fn column_list() -> String {
    EVENT_COLUMNS.map(|c| c.name).join(", ")
}

/// One column's values for a batch of events, in the types both backends bind.
pub(crate) enum ColumnValues<'e> {
    Uuid(Vec<Option<DbUuid>>),
    Text(Vec<Option<&'e str>>),
    Instant(Vec<DbTimestamp>),
    Json(Vec<DbJsonObject<'e>>),
}

impl<'e> ColumnValues<'e> {
    /// The column's PostgreSQL type.
    pub(crate) const fn pg_type(&self) -> &'static str {
        match self {
            ColumnValues::Uuid(_) => "uuid",
            ColumnValues::Text(_) => "text",
            ColumnValues::Instant(_) => "timestamptz",
            ColumnValues::Json(_) => "jsonb",
        }
    }

    /// The values of every column ([`EVENT_COLUMNS`]' order) for `events`.
    pub(crate) fn of(events: &[&'e AnalyticsEvent]) -> Vec<ColumnValues<'e>> {
        EVENT_COLUMNS
            .iter()
            .map(|column| match column.take {
                Take::Uuid(take) => {
                    ColumnValues::Uuid(events.iter().map(|&e| take(e).map(DbUuid)).collect())
                }
                Take::Text(take) => ColumnValues::Text(events.iter().map(|&e| take(e)).collect()),
                Take::Instant(take) => {
                    ColumnValues::Instant(events.iter().map(|&e| DbTimestamp(take(e))).collect())
                }
                Take::Json(take) => {
                    ColumnValues::Json(events.iter().map(|&e| DbJsonObject(take(e))).collect())
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use flowgate_domain::events::{Kept, EVENT_FIELDS};

    use super::EVENT_COLUMNS;

    #[test]
    fn every_column_of_the_event_field_table_is_written() {
        let written: Vec<&str> = EVENT_COLUMNS.iter().map(|c| c.name).collect();
        for field in EVENT_FIELDS {
            if let Kept::Column(column) = field.kept() {
                assert!(
                    written.contains(&column),
                    "`{}` is kept in column `{column}`, which the writes do not list",
                    field.name()
                );
            }
        }
        assert!(written.contains(&"payload"), "the payload members' column");
    }
}
