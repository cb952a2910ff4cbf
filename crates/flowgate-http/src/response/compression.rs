//! Response compression (D11), decided here and only here: which coding a request gets
//! ([`negotiate`]), which bodies are too small to compress ([`MIN_COMPRESSED_BYTES`]), how a
//! batch body is laid out for its coding ([`batch_body`]), and how each answer is encoded
//! ([`encode`]): a resolve body holding large flows goes out as one gzip member whose flows
//! were compressed once per version ([`BodyWriter::finish_gzip`]); every other body to
//! compress goes through actix's encoder (P6, P7).

use actix_http::encoding::Encoder;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::http::header::{self, AcceptEncoding, ContentEncoding, Encoding, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpMessage, HttpRequest, HttpResponse};

use super::body::BodyWriter;
use super::flow_cache::CompressedFlows;
use super::json::json_response;

/// The content coding of a response (D11: compressed when the client asks).
///
/// gzip whenever the client accepts it, whatever its q-values say: single resolve sends the
/// flow compressed once per version ([`BodyWriter::finish_gzip`]), and actix's brotli
/// encoder sets up a 4 MiB window for every response (more than ten times gzip's CPU per flow, and
/// hundreds of MiB at a few dozen connections). Otherwise the best of brotli, zstd and deflate
/// by the client's q-values, as actix negotiates them; identity when the header is absent or
/// names nothing we have (RFC 9110 §12.5.3: send identity rather than refuse).
pub(crate) fn negotiate(req: &HttpRequest) -> ContentEncoding {
    match scan(req.headers().get_all(header::ACCEPT_ENCODING)) {
        Accepts::Gzip => ContentEncoding::Gzip,
        // actix's negotiation below could only choose identity, and its parse into q-values
        // and a set of codings cost about 3,000 instructions per request, 8% of flowgate's
        // own work in a resolve.
        Accepts::IdentityOnly => ContentEncoding::Identity,
        Accepts::Another => {
            const OTHERS: [Encoding; 4] = [
                Encoding::identity(),
                Encoding::brotli(),
                Encoding::deflate(),
                Encoding::zstd(),
            ];
            match req
                .get_header::<AcceptEncoding>()
                .and_then(|accept| accept.negotiate(OTHERS.iter()))
            {
                Some(Encoding::Known(coding)) => coding,
                _ => ContentEncoding::Identity,
            }
        }
    }
}

/// What an `Accept-Encoding` header accepts, as far as [`negotiate`] needs to know.
#[derive(Debug, PartialEq, Eq)]
enum Accepts {
    /// gzip: named without `q=0`, or not named and covered by a `*` without `q=0`.
    Gzip,
    /// No coding we have but identity (`identity`, as Python's `http.client` sends by
    /// default; or no header at all).
    IdentityOnly,
    /// Maybe brotli, deflate or zstd (named, or `*`, without `q=0`; or a line that is not
    /// text): for actix's negotiation by q-values.
    Another,
}

/// Reads every `Accept-Encoding` line in order, in one pass, as actix's parse of the header
/// reads them all; the first gzip item decides about gzip.
fn scan<'a>(lines: impl Iterator<Item = &'a HeaderValue>) -> Accepts {
    let (mut gzip_refused, mut star, mut another) = (false, false, false);
    for line in lines {
        let Ok(text) = line.to_str() else {
            another = true;
            continue;
        };
        for (name, refused) in text.split(',').map(coding) {
            if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
                if !refused && !gzip_refused {
                    return Accepts::Gzip;
                }
                gzip_refused = true;
            } else if !refused {
                star |= name == "*";
                another |= name == "*"
                    || ["br", "deflate", "zstd"]
                        .iter()
                        .any(|c| name.eq_ignore_ascii_case(c));
            }
        }
    }
    match (star && !gzip_refused, another) {
        (true, _) => Accepts::Gzip,
        (false, true) => Accepts::Another,
        (false, false) => Accepts::IdentityOnly,
    }
}

/// One `Accept-Encoding` item: its coding and whether it is refused (`q=0`).
fn coding(item: &str) -> (&str, bool) {
    let mut parts = item.split(';');
    let name = parts.next().unwrap_or("").trim();
    let refused = parts.any(|p| {
        let p = p.trim();
        p.strip_prefix("q=")
            .or_else(|| p.strip_prefix("Q="))
            .and_then(|q| q.trim().parse::<f32>().ok())
            == Some(0.0)
    });
    (name, refused)
}

/// Bodies shorter than this go out uncompressed whatever the client accepts: a resolve without
/// a flow or a problem body (a few hundred bytes) fits one TCP segment either way, and a
/// compressor set up for it cost more CPU than the rest of the request.
pub(crate) const MIN_COMPRESSED_BYTES: u64 = 1024;

/// What a handler answers: a finished response, or a 200 resolve body whose encoding
/// [`encode`] chooses.
pub(crate) enum Reply {
    /// A response to send as it is, compressed when it is large enough.
    Response(HttpResponse),
    /// A resolve or batch resolve result (`application/json`, 200).
    Resolved(BodyWriter),
}

impl From<HttpResponse> for Reply {
    fn from(res: HttpResponse) -> Self {
        Reply::Response(res)
    }
}

/// The body a batch of results is written into. For gzip, flows stay shared, to go out
/// compressed once per version (compressing a batch of 50 flows per request costs about a
/// millisecond of CPU); otherwise one contiguous chunk of about `size()` bytes, since actix
/// writes a body of many chunks to the socket in many writes.
pub(crate) fn batch_body(coding: ContentEncoding, size: impl FnOnce() -> usize) -> BodyWriter {
    if coding == ContentEncoding::Gzip {
        BodyWriter::with_capacity(1024)
    } else {
        BodyWriter::contiguous(size())
    }
}

/// The response for `reply` in `coding`, the coding [`negotiate`] chose for the request.
pub(crate) fn encode(
    coding: ContentEncoding,
    reply: Reply,
    flows: &CompressedFlows,
) -> HttpResponse {
    let res = match reply {
        Reply::Response(res) => res,
        Reply::Resolved(body) => match coding {
            ContentEncoding::Identity => return json_response(StatusCode::OK, body.finish()),
            ContentEncoding::Gzip => match body.finish_gzip(flows) {
                Ok(gzip) => {
                    let mut res = json_response(StatusCode::OK, gzip);
                    let headers = res.headers_mut();
                    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
                    return res;
                }
                Err(body) => json_response(StatusCode::OK, body.finish_joined()),
            },
            // One chunk for the compressor: actix's encoder hands every chunk over 1 KiB to
            // the blocking pool and flushes after each.
            _ => json_response(StatusCode::OK, body.finish_joined()),
        },
    };
    compress(coding, res)
}

/// Compresses a response body in `coding`, unless the coding is identity or the body is known
/// to be shorter than [`MIN_COMPRESSED_BYTES`] (then sent as it is, with
/// `Vary: Accept-Encoding` as every response to a client that accepts a coding).
fn compress(coding: ContentEncoding, mut res: HttpResponse) -> HttpResponse {
    if coding == ContentEncoding::Identity {
        return res;
    }
    if matches!(res.body().size(), BodySize::Sized(n) if n < MIN_COMPRESSED_BYTES) {
        res.headers_mut()
            .append(header::VARY, HeaderValue::from_static("accept-encoding"));
        return res;
    }
    res.map_body(|head, body| BoxBody::new(Encoder::response(coding, head, body)))
}
