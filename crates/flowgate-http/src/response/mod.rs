//! What the API sends back: the JSON of resolve results ([`json`]), bodies that splice the
//! snapshot's flow bytes in without copying them ([`body`]), gzip framing around flows
//! compressed ahead of time ([`gzip`]), the cache of those compressed flows across snapshots
//! ([`flow_cache`]), and the one place that decides how a response is compressed
//! ([`compression`]).
//!
//! The published version's `flow_schema` and `fonts` were serialised once when the snapshot
//! was built; a response is written as small owned pieces around the snapshot's own bytes, so
//! the cost of a response does not depend on the size of the flow.

pub(crate) mod body;
pub(crate) mod compression;
pub(crate) mod flow_cache;
pub(crate) mod gzip;
pub(crate) mod json;

pub(crate) use body::BodyWriter;
pub(crate) use compression::Reply;
pub(crate) use flow_cache::CompressedFlows;
pub(crate) use json::{json_response, write_result};

#[cfg(test)]
mod test_support;
