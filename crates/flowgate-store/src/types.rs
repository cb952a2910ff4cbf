//! SQL types shared by both backends, so one [`crate::schema`] serves PostgreSQL and SQLite.
//!
//! Each type has a fixed PostgreSQL type (built-in OIDs, so no per-connection type lookup) and a
//! SQLite storage class:
//!
//! | SQL type | PostgreSQL | SQLite | Rust value |
//! |---|---|---|---|
//! | [`sql::Uuid`] | `uuid` | 16-byte `BLOB` | [`DbUuid`] |
//! | [`sql::Instant`] | `timestamptz` (microseconds) | `TEXT`, RFC 3339 UTC, six fractional digits | [`DbTimestamp`] |
//! | [`sql::Json`] | `jsonb` | `TEXT` | [`DbJson`] |
//!
//! Local newtypes carry the conversions: implementing diesel's traits on `uuid::Uuid` or
//! `time::OffsetDateTime` for a local SQL type collides with diesel's own impls for those types.

use std::io::Write as _;

use diesel::backend::Backend;
use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::pg::Pg;
use diesel::serialize::{self, IsNull, Output, ToSql};
use diesel::sqlite::Sqlite;
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// The SQL types of the shared schema.
pub mod sql {
    use diesel::query_builder::QueryId;
    use diesel::sql_types::SqlType;

    /// A UUID: PostgreSQL `uuid` (OID 2950), SQLite 16-byte `BLOB`.
    #[derive(Debug, Clone, Copy, Default, QueryId, SqlType)]
    #[diesel(postgres_type(oid = 2950, array_oid = 2951))]
    #[diesel(sqlite_type(name = "Binary"))]
    pub struct Uuid;

    /// A point in time: PostgreSQL `timestamptz` (OID 1184), SQLite RFC 3339 `TEXT` in UTC.
    #[derive(Debug, Clone, Copy, Default, QueryId, SqlType)]
    #[diesel(postgres_type(oid = 1184, array_oid = 1185))]
    #[diesel(sqlite_type(name = "Text"))]
    pub struct Instant;

    /// A JSON document that is stored, never served back byte for byte: PostgreSQL `jsonb`
    /// (OID 3802), SQLite `TEXT`.
    #[derive(Debug, Clone, Copy, Default, QueryId, SqlType)]
    #[diesel(postgres_type(oid = 3802, array_oid = 3807))]
    #[diesel(sqlite_type(name = "Text"))]
    pub struct Json;
}

/// A UUID column value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, AsExpression, FromSqlRow)]
#[diesel(sql_type = sql::Uuid)]
pub struct DbUuid(pub uuid::Uuid);

impl ToSql<sql::Uuid, Pg> for DbUuid {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <uuid::Uuid as ToSql<diesel::sql_types::Uuid, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<sql::Uuid, Pg> for DbUuid {
    fn from_sql(bytes: <Pg as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        <uuid::Uuid as FromSql<diesel::sql_types::Uuid, Pg>>::from_sql(bytes).map(DbUuid)
    }
}

impl ToSql<sql::Uuid, Sqlite> for DbUuid {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(self.0.as_bytes().as_slice());
        Ok(IsNull::No)
    }
}

impl FromSql<sql::Uuid, Sqlite> for DbUuid {
    fn from_sql(bytes: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        let raw = <Vec<u8> as FromSql<diesel::sql_types::Binary, Sqlite>>::from_sql(bytes)?;
        uuid::Uuid::from_slice(&raw)
            .map(DbUuid)
            .map_err(|e| format!("a stored UUID is not 16 bytes: {e}").into())
    }
}

/// A timestamp column value. Values are written in UTC; PostgreSQL keeps microseconds, and the
/// SQLite text form is written with microseconds too, so both backends round alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, AsExpression, FromSqlRow)]
#[diesel(sql_type = sql::Instant)]
pub struct DbTimestamp(pub OffsetDateTime);

impl DbTimestamp {
    /// The SQLite text form: `YYYY-MM-DDTHH:MM:SS.ffffffZ`, fixed width so text order is time
    /// order.
    fn to_sqlite_text(self) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
        let t = self.0.to_offset(UtcOffset::UTC);
        let mut s = Vec::with_capacity(27);
        write!(
            s,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.microsecond()
        )?;
        if !(0..=9999).contains(&t.year()) {
            return Err(format!("year {} cannot be stored", t.year()).into());
        }
        Ok(String::from_utf8(s)?)
    }
}

impl ToSql<sql::Instant, Pg> for DbTimestamp {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <OffsetDateTime as ToSql<diesel::sql_types::Timestamptz, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<sql::Instant, Pg> for DbTimestamp {
    fn from_sql(bytes: <Pg as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        <OffsetDateTime as FromSql<diesel::sql_types::Timestamptz, Pg>>::from_sql(bytes)
            .map(DbTimestamp)
    }
}

impl ToSql<sql::Instant, Sqlite> for DbTimestamp {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(self.to_sqlite_text()?);
        Ok(IsNull::No)
    }
}

impl FromSql<sql::Instant, Sqlite> for DbTimestamp {
    fn from_sql(bytes: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<diesel::sql_types::Text, Sqlite>>::from_sql(bytes)?;
        OffsetDateTime::parse(&text, &Rfc3339)
            .map(|t| DbTimestamp(t.to_offset(UtcOffset::UTC)))
            .map_err(|e| format!("a stored timestamp `{text}` is not RFC 3339: {e}").into())
    }
}

/// A JSON column value (see [`sql::Json`]).
#[derive(Debug, Clone, PartialEq, AsExpression, FromSqlRow)]
#[diesel(sql_type = sql::Json)]
pub struct DbJson(pub serde_json::Value);

impl ToSql<sql::Json, Pg> for DbJson {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <serde_json::Value as ToSql<diesel::sql_types::Jsonb, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<sql::Json, Pg> for DbJson {
    fn from_sql(bytes: <Pg as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        <serde_json::Value as FromSql<diesel::sql_types::Jsonb, Pg>>::from_sql(bytes).map(DbJson)
    }
}

impl ToSql<sql::Json, Sqlite> for DbJson {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(serde_json::to_string(&self.0)?);
        Ok(IsNull::No)
    }
}

impl FromSql<sql::Json, Sqlite> for DbJson {
    fn from_sql(bytes: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<diesel::sql_types::Text, Sqlite>>::from_sql(bytes)?;
        Ok(DbJson(serde_json::from_str(&text)?))
    }
}

/// A borrowed JSON object written as a [`sql::Json`] value: the event payload, serialised
/// straight from the event instead of from a copy of it.
#[derive(Debug, Clone, Copy, AsExpression)]
#[diesel(sql_type = sql::Json)]
pub struct DbJsonObject<'a>(pub &'a serde_json::Map<String, serde_json::Value>);

impl ToSql<sql::Json, Pg> for DbJsonObject<'_> {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        // jsonb's binary input: a version byte (1), then the document as text.
        out.write_all(&[1])?;
        serde_json::to_writer(out, self.0)?;
        Ok(IsNull::No)
    }
}

impl ToSql<sql::Json, Sqlite> for DbJsonObject<'_> {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(serde_json::to_string(self.0)?);
        Ok(IsNull::No)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn sqlite_timestamps_are_fixed_width_utc_with_microseconds() {
        let t = DbTimestamp(datetime!(2026-03-04 05:06:07.123456789 +02:00));
        assert_eq!(t.to_sqlite_text().unwrap(), "2026-03-04T03:06:07.123456Z");
        let t = DbTimestamp(datetime!(2026-03-04 05:06:07 UTC));
        assert_eq!(t.to_sqlite_text().unwrap(), "2026-03-04T05:06:07.000000Z");
    }
}
