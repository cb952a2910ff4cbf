//! App Store Server Notifications V2: verifying Apple's signed payloads (D30).
//!
//! Apple posts `{"signedPayload": "<JWS>"}`: a compact JWS (`header.payload.signature`, each
//! part base64url without padding) whose header is `{"alg": "ES256", "x5c": [leaf,
//! intermediate, root]}`, the certificates in standard base64 DER. The same form carries the
//! nested `signedTransactionInfo` and `signedRenewalInfo`. Anyone can post to the route, so
//! [`verify`] trusts a payload only when all of this holds, checked in this order, each
//! failure a distinct [`JwsError`] with a stable [`JwsError::code`]:
//!
//! 1. the token is at most [`MAX_TOKEN_BYTES`] long (refused before any decoding, so a flood
//!    of large bodies costs nothing) and has exactly three parts of valid base64url;
//! 2. the header is a JSON object whose `alg` is exactly `"ES256"`: `"none"`, HMAC (`"HS256"`,
//!    which would turn a public key into a shared secret) and anything else are refused, as is
//!    a `crit` header (no extension is understood here);
//! 3. `x5c` is an array of exactly three certificates, each standard base64 of one DER
//!    X.509 certificate with nothing after it;
//! 4. the third certificate is byte for byte one of the trusted roots ([`AppleRoots`]: Apple
//!    Root CA - G3 by default); a chain that is valid in itself but ends elsewhere is refused;
//! 5. the intermediate is signed by the root and the leaf by the intermediate (ECDSA on P-256
//!    or P-384 with SHA-256 or SHA-384 only, the algorithm inside the signed part equal to the
//!    outer one);
//! 6. the intermediate is a CA (`basicConstraints` with `cA`) and carries Apple's marker
//!    extension 1.2.840.113635.100.6.2.1, the leaf Apple's 1.2.840.113635.100.6.11.1: Apple's
//!    root signs other intermediates, and only these two mark the App Store's signing chain;
//! 7. the leaf's key is an EC P-256 key and the signature (64 bytes, raw `r || s`) verifies
//!    with it over `header.payload`;
//! 8. the payload is a JSON object;
//! 9. each of the three certificates is within its validity at the signing date: the
//!    payload's `signedDate` (milliseconds since the epoch) when it is present and a number,
//!    else the `now` the caller passes. Apple signs with certificates that may have expired
//!    since (a retried notification days later), so the signing date, not the arrival, is
//!    what counts; it is read only after the signature verified, so it is Apple's.
//!
//! Chains of the same shape under a generated root are made elsewhere: the demo's
//! ([`crate::apple_demo_signer::DemoSigner`], for `flowgate demo --traffic`, whose root only a
//! development server trusts) and the tests' (`apple_test_chain`, feature `test-util`, which
//! also forges the bad ones). Nothing else signs.

use flowgate_domain::text::{json_kind, shorten};
use std::fmt;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::signature::{self, UnparsedPublicKey};
use serde_json::Value;
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_SIG_ECDSA_WITH_SHA256, OID_SIG_ECDSA_WITH_SHA384,
};
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;

/// The largest token [`verify`] decodes, in bytes (64 KiB). Apple's notifications, with their
/// nested signed transaction and renewal, are a fraction of it.
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// Apple's marker extension on the intermediate of the App Store's signing chain (Apple
/// Worldwide Developer Relations).
pub const INTERMEDIATE_MARKER_OID: &str = "1.2.840.113635.100.6.2.1";

/// Apple's marker extension on the leaf that signs App Store payloads.
pub const LEAF_MARKER_OID: &str = "1.2.840.113635.100.6.11.1";

/// Apple Root CA - G3 (P-384, valid 2014 to 2039), built into the binary.
const APPLE_ROOT_CA_G3_PEM: &[u8] = include_bytes!("../data/AppleRootCA-G3.pem");

/// How many characters of an offending value an error message quotes.
const QUOTE_CHARS: usize = 32;

/// The roots a chain must end in: DER certificates, compared byte for byte.
#[derive(Clone, PartialEq, Eq)]
pub struct AppleRoots {
    ders: Vec<Vec<u8>>,
}

impl AppleRoots {
    /// Apple Root CA - G3, the root of the App Store's signatures, as built into the binary.
    ///
    /// Its parsing is checked by the tests; were it ever to fail, the result would trust no
    /// root and refuse every payload rather than accept any.
    pub fn apple() -> Self {
        Self::from_pem(APPLE_ROOT_CA_G3_PEM).unwrap_or_else(|_| Self { ders: Vec::new() })
    }

    /// The roots in a PEM text of one or more `CERTIFICATE` blocks (text around the blocks is
    /// ignored). Each must be one DER X.509 certificate; another block type, bad base64 or no
    /// block at all is an error.
    pub fn from_pem(pem: &[u8]) -> Result<Self, RootError> {
        let mut ders = Vec::new();
        for (index, block) in Pem::iter_from_buffer(pem).enumerate() {
            let block = block.map_err(|e| RootError::Pem {
                index,
                reason: e.to_string(),
            })?;
            if block.label != "CERTIFICATE" {
                return Err(RootError::Pem {
                    index,
                    reason: format!("a {:?} block, not a CERTIFICATE", block.label),
                });
            }
            parse_certificate(&block.contents)
                .map_err(|reason| RootError::Certificate { index, reason })?;
            ders.push(block.contents);
        }
        if ders.is_empty() {
            return Err(RootError::Empty);
        }
        Ok(Self { ders })
    }

    /// The roots in PEM files (`stores.apple_root_certificates`), all of each file's
    /// certificates. An error names the file and what is wrong with it; no file at all is an
    /// error too.
    pub fn from_pem_files(paths: &[PathBuf]) -> Result<Self, RootError> {
        let mut ders = Vec::new();
        for path in paths {
            let in_file = |error: RootError| RootError::InFile {
                path: path.clone(),
                source: Box::new(error),
            };
            let text = std::fs::read(path).map_err(|source| RootError::Read {
                path: path.clone(),
                source,
            })?;
            ders.extend(Self::from_pem(&text).map_err(in_file)?.ders);
        }
        if ders.is_empty() {
            return Err(RootError::Empty);
        }
        Ok(Self { ders })
    }

    /// The SHA-256 fingerprints of the roots (`63:34:3A:...`), in their order, for logs.
    pub fn fingerprints(&self) -> Vec<String> {
        self.ders.iter().map(|der| fingerprint(der)).collect()
    }

    /// These roots and `other`'s: both trusted.
    #[must_use]
    pub fn and(mut self, other: &AppleRoots) -> Self {
        for der in &other.ders {
            if !self.contains(der) {
                self.ders.push(der.clone());
            }
        }
        self
    }

    /// These DER certificates as roots, unchecked: for a root this process generated (the
    /// demo's signer).
    pub(crate) fn from_ders(ders: Vec<Vec<u8>>) -> Self {
        Self { ders }
    }

    fn contains(&self, der: &[u8]) -> bool {
        self.ders.iter().any(|root| root.as_slice() == der)
    }
}

impl fmt::Debug for AppleRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppleRoots")
            .field("sha256", &self.fingerprints())
            .finish()
    }
}

/// Why trusted roots could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reading error.
        source: std::io::Error,
    },
    /// No certificate at all: no PEM block, or no file.
    #[error("no PEM certificate found")]
    Empty,
    /// A PEM block (counted from 0) that is not a readable `CERTIFICATE` block.
    #[error("PEM block {index}: {reason}")]
    Pem {
        /// The block's position, from 0.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A `CERTIFICATE` block (counted from 0) that is not one DER X.509 certificate.
    #[error("PEM block {index} is not an X.509 certificate: {reason}")]
    Certificate {
        /// The block's position, from 0.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// An error in one file of [`AppleRoots::from_pem_files`].
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        source: Box<RootError>,
    },
}

impl RootError {
    /// The file the error is about, when there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Read { path, .. } | Self::InFile { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// A certificate's place in the `x5c` chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainPosition {
    /// The first: the certificate whose key signs the payload.
    Leaf,
    /// The second: signed by the root, signs the leaf.
    Intermediate,
    /// The third: one of the trusted roots.
    Root,
}

impl ChainPosition {
    const ALL: [Self; 3] = [Self::Leaf, Self::Intermediate, Self::Root];

    /// `leaf`, `intermediate` or `root`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Leaf => "leaf",
            Self::Intermediate => "intermediate",
            Self::Root => "root",
        }
    }

    fn base64_part(self) -> &'static str {
        match self {
            Self::Leaf => "x5c leaf certificate",
            Self::Intermediate => "x5c intermediate certificate",
            Self::Root => "x5c root certificate",
        }
    }
}

impl fmt::Display for ChainPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a signed payload is not trusted. [`JwsError::code`] names the check that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwsError {
    /// The token is longer than [`MAX_TOKEN_BYTES`].
    #[error("the token is {len} bytes, over the limit of {MAX_TOKEN_BYTES}")]
    TooLarge {
        /// Its length in bytes.
        len: usize,
    },
    /// The token is not three parts separated by `.`.
    #[error("a compact JWS has 3 parts separated by '.', this token has {parts}")]
    NotThreeParts {
        /// How many parts it has.
        parts: usize,
    },
    /// A part is not valid base64 (base64url without padding for the JWS's parts, standard
    /// base64 for `x5c` certificates).
    #[error("the {part} is not valid base64: {value:?}")]
    BadBase64 {
        /// Which part: `header`, `payload`, `signature` or an `x5c` certificate.
        part: &'static str,
        /// Its beginning.
        value: String,
    },
    /// The header is not a JSON object, or has a `crit` parameter.
    #[error("the JWS header is malformed: {reason}")]
    HeaderMalformed {
        /// What is wrong with it.
        reason: String,
    },
    /// The header's `alg` is missing or not `"ES256"`.
    #[error("the JWS alg is {}, not \"ES256\"", quoted_or_missing(alg.as_deref()))]
    UnsupportedAlg {
        /// The `alg` found (its JSON text when it is not a string), if any.
        alg: Option<String>,
    },
    /// The header's `x5c` is missing or not an array.
    #[error("the JWS header has no x5c certificate chain: {reason}")]
    X5cMissing {
        /// What was found instead.
        reason: &'static str,
    },
    /// `x5c` does not hold exactly three certificates.
    #[error("x5c holds {count} certificates, not 3 (leaf, intermediate, root)")]
    X5cLength {
        /// How many it holds.
        count: usize,
    },
    /// An `x5c` entry is not a string or not one DER X.509 certificate.
    #[error("the {position} certificate is malformed: {reason}")]
    CertificateMalformed {
        /// Which certificate.
        position: ChainPosition,
        /// What is wrong with it.
        reason: String,
    },
    /// The chain's root is not one of the trusted roots.
    #[error("the chain's root (SHA-256 {fingerprint}) is not a trusted root")]
    UntrustedRoot {
        /// The SHA-256 fingerprint of the root the chain ends in.
        fingerprint: String,
    },
    /// A certificate is not signed by the next one in the chain (or not with ECDSA on P-256 or
    /// P-384 with SHA-256 or SHA-384).
    #[error("the {position} certificate is not signed by its issuer in the chain: {reason}")]
    ChainSignatureInvalid {
        /// The certificate whose signature fails (leaf or intermediate).
        position: ChainPosition,
        /// Why.
        reason: String,
    },
    /// The intermediate is not a CA (`basicConstraints` `cA`).
    #[error("the intermediate certificate is not a CA (basicConstraints cA)")]
    IntermediateNotCa,
    /// The intermediate lacks Apple's marker extension [`INTERMEDIATE_MARKER_OID`].
    #[error(
        "the intermediate certificate lacks Apple's marker extension {INTERMEDIATE_MARKER_OID}"
    )]
    IntermediateMarkerMissing,
    /// The leaf lacks Apple's marker extension [`LEAF_MARKER_OID`].
    #[error("the leaf certificate lacks Apple's marker extension {LEAF_MARKER_OID}")]
    LeafMarkerMissing,
    /// A certificate's validity ended before the signing date.
    #[error("the {position} certificate expired at {not_after}, before the signing date {at}")]
    CertificateExpired {
        /// Which certificate.
        position: ChainPosition,
        /// The end of its validity (RFC 3339).
        not_after: String,
        /// The signing date (RFC 3339).
        at: String,
    },
    /// A certificate's validity begins after the signing date.
    #[error("the {position} certificate is valid from {not_before}, after the signing date {at}")]
    CertificateNotYetValid {
        /// Which certificate.
        position: ChainPosition,
        /// The start of its validity (RFC 3339).
        not_before: String,
        /// The signing date (RFC 3339).
        at: String,
    },
    /// The leaf's key is not an EC P-256 key, the only key ES256 verifies with.
    #[error("the leaf certificate's key is not an EC P-256 key: {key}")]
    LeafKeyNotP256 {
        /// The key's algorithm and curve, as object identifiers.
        key: String,
    },
    /// The signature is not 64 bytes (ES256's raw `r || s`).
    #[error("the signature is {len} bytes, not ES256's 64 (r || s)")]
    SignatureLength {
        /// Its length in bytes.
        len: usize,
    },
    /// The signature does not verify over `header.payload` with the leaf's key.
    #[error("the signature does not verify with the leaf certificate's key")]
    SignatureInvalid,
    /// The payload is not JSON.
    #[error("the payload is not JSON: {reason}")]
    PayloadMalformed {
        /// The parser's error.
        reason: String,
    },
    /// The payload is JSON, but not an object.
    #[error("the payload is a JSON {found}, not an object")]
    PayloadNotObject {
        /// What it is: `array`, `string`, `number`, `boolean` or `null`.
        found: &'static str,
    },
}

impl JwsError {
    /// A stable snake_case name of the failed check, for logs, metrics and problem details.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::NotThreeParts { .. } => "not_three_parts",
            Self::BadBase64 { .. } => "bad_base64",
            Self::HeaderMalformed { .. } => "header_malformed",
            Self::UnsupportedAlg { .. } => "unsupported_alg",
            Self::X5cMissing { .. } => "x5c_missing",
            Self::X5cLength { .. } => "x5c_length",
            Self::CertificateMalformed { .. } => "certificate_malformed",
            Self::UntrustedRoot { .. } => "untrusted_root",
            Self::ChainSignatureInvalid { .. } => "chain_signature_invalid",
            Self::IntermediateNotCa => "intermediate_not_ca",
            Self::IntermediateMarkerMissing => "intermediate_marker_missing",
            Self::LeafMarkerMissing => "leaf_marker_missing",
            Self::CertificateExpired { .. } => "certificate_expired",
            Self::CertificateNotYetValid { .. } => "certificate_not_yet_valid",
            Self::LeafKeyNotP256 { .. } => "leaf_key_not_p256",
            Self::SignatureLength { .. } => "signature_length",
            Self::SignatureInvalid => "signature_invalid",
            Self::PayloadMalformed { .. } => "payload_malformed",
            Self::PayloadNotObject { .. } => "payload_not_object",
        }
    }
}

/// Verifies a compact JWS signed by the App Store (the module's documentation lists the
/// checks) and returns its payload, a JSON object. `now` is the signing date used when the
/// payload has no numeric `signedDate`.
pub fn verify(roots: &AppleRoots, jws: &str, now: OffsetDateTime) -> Result<Value, JwsError> {
    if jws.len() > MAX_TOKEN_BYTES {
        return Err(JwsError::TooLarge { len: jws.len() });
    }
    let mut parts = jws.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwsError::NotThreeParts {
            parts: jws.split('.').count(),
        });
    };
    let header_bytes = decode_base64url("header", header_b64)?;
    let payload_bytes = decode_base64url("payload", payload_b64)?;
    let signature = decode_base64url("signature", signature_b64)?;

    let ders = chain_of(&header_bytes)?;
    let [leaf, intermediate, root] = [&ders[0], &ders[1], &ders[2]].map(|der| der.as_slice());
    let leaf = parse_chain_certificate(ChainPosition::Leaf, leaf)?;
    let intermediate = parse_chain_certificate(ChainPosition::Intermediate, intermediate)?;
    let root_cert = parse_chain_certificate(ChainPosition::Root, root)?;

    check_chain(roots, root, [&leaf, &intermediate, &root_cert])?;

    // The signing input is the token's first two parts as sent, with the dot between them.
    let signing_input = &jws.as_bytes()[..header_b64.len() + 1 + payload_b64.len()];
    check_signature(&leaf, &signature, signing_input)?;

    let payload: Value =
        serde_json::from_slice(&payload_bytes).map_err(|e| JwsError::PayloadMalformed {
            reason: e.to_string(),
        })?;
    if !payload.is_object() {
        return Err(JwsError::PayloadNotObject {
            found: json_kind(&payload),
        });
    }
    let at = signing_date(&payload).unwrap_or(now);
    for (certificate, position) in [&leaf, &intermediate, &root_cert]
        .into_iter()
        .zip(ChainPosition::ALL)
    {
        check_validity(position, certificate, at)?;
    }
    Ok(payload)
}

/// The DER certificates of the header's `x5c` (leaf, intermediate, root), after checking the
/// header: a JSON object whose `alg` is `ES256`, without `crit`, with exactly three entries.
fn chain_of(header_bytes: &[u8]) -> Result<Vec<Vec<u8>>, JwsError> {
    let header: Value =
        serde_json::from_slice(header_bytes).map_err(|e| JwsError::HeaderMalformed {
            reason: e.to_string(),
        })?;
    let Value::Object(header) = header else {
        return Err(JwsError::HeaderMalformed {
            reason: format!("a JSON {}, not an object", json_kind(&header)),
        });
    };
    match header.get("alg") {
        Some(Value::String(alg)) if alg == "ES256" => {}
        Some(Value::String(alg)) => {
            return Err(JwsError::UnsupportedAlg {
                alg: Some(shorten(alg, QUOTE_CHARS)),
            })
        }
        Some(other) => {
            return Err(JwsError::UnsupportedAlg {
                alg: Some(shorten(&other.to_string(), QUOTE_CHARS)),
            })
        }
        None => return Err(JwsError::UnsupportedAlg { alg: None }),
    }
    if header.contains_key("crit") {
        return Err(JwsError::HeaderMalformed {
            reason: "a crit parameter, and no extension is supported".to_owned(),
        });
    }
    let entries = match header.get("x5c") {
        Some(Value::Array(entries)) => entries,
        Some(_) => {
            return Err(JwsError::X5cMissing {
                reason: "not an array",
            })
        }
        None => return Err(JwsError::X5cMissing { reason: "absent" }),
    };
    if entries.len() != 3 {
        return Err(JwsError::X5cLength {
            count: entries.len(),
        });
    }
    let mut ders = Vec::with_capacity(3);
    for (entry, position) in entries.iter().zip(ChainPosition::ALL) {
        let Value::String(text) = entry else {
            return Err(JwsError::CertificateMalformed {
                position,
                reason: format!("a JSON {}, not a base64 string", json_kind(entry)),
            });
        };
        let der = STANDARD.decode(text).map_err(|_| JwsError::BadBase64 {
            part: position.base64_part(),
            value: shorten(text, QUOTE_CHARS),
        })?;
        ders.push(der);
    }
    Ok(ders)
}

/// The chain's trust: its root is one of `roots` (byte for byte), each certificate is issued by
/// the next, the intermediate is a CA, and both carry Apple's marker extensions.
fn check_chain(
    roots: &AppleRoots,
    root: &[u8],
    [leaf, intermediate, root_cert]: [&X509Certificate<'_>; 3],
) -> Result<(), JwsError> {
    if !roots.contains(root) {
        return Err(JwsError::UntrustedRoot {
            fingerprint: fingerprint(root),
        });
    }
    check_issued_by(ChainPosition::Intermediate, intermediate, root_cert)?;
    check_issued_by(ChainPosition::Leaf, leaf, intermediate)?;
    match intermediate.basic_constraints() {
        Ok(Some(constraints)) if constraints.value.ca => {}
        _ => return Err(JwsError::IntermediateNotCa),
    }
    if !has_extension(intermediate, INTERMEDIATE_MARKER_OID) {
        return Err(JwsError::IntermediateMarkerMissing);
    }
    if !has_extension(leaf, LEAF_MARKER_OID) {
        return Err(JwsError::LeafMarkerMissing);
    }

    Ok(())
}

/// The leaf's key is ECDSA P-256 and `signature` (64 bytes, r and s) signs `signing_input`
/// with it.
fn check_signature(
    leaf: &X509Certificate<'_>,
    signature: &[u8],
    signing_input: &[u8],
) -> Result<(), JwsError> {
    let key = leaf.public_key();
    let curve = key
        .algorithm
        .parameters
        .as_ref()
        .and_then(|parameters| parameters.as_oid().ok());
    if key.algorithm.algorithm != OID_KEY_TYPE_EC_PUBLIC_KEY || curve != Some(OID_EC_P256) {
        return Err(JwsError::LeafKeyNotP256 {
            key: match curve {
                Some(curve) => format!("{} on {}", key.algorithm.algorithm, curve),
                None => key.algorithm.algorithm.to_id_string(),
            },
        });
    }
    if signature.len() != 64 {
        return Err(JwsError::SignatureLength {
            len: signature.len(),
        });
    }
    UnparsedPublicKey::new(
        &signature::ECDSA_P256_SHA256_FIXED,
        &key.subject_public_key.data,
    )
    .verify(signing_input, signature)
    .map_err(|_| JwsError::SignatureInvalid)?;
    Ok(())
}

fn decode_base64url(part: &'static str, text: &str) -> Result<Vec<u8>, JwsError> {
    URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| JwsError::BadBase64 {
            part,
            value: shorten(text, QUOTE_CHARS),
        })
}

/// One DER certificate with nothing after it; the error is the reason.
pub(crate) fn parse_certificate(der: &[u8]) -> Result<X509Certificate<'_>, String> {
    match X509Certificate::from_der(der) {
        Ok(([], certificate)) => Ok(certificate),
        Ok((rest, _)) => Err(format!("{} bytes after the certificate", rest.len())),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_chain_certificate(
    position: ChainPosition,
    der: &[u8],
) -> Result<X509Certificate<'_>, JwsError> {
    parse_certificate(der).map_err(|reason| JwsError::CertificateMalformed { position, reason })
}

fn check_issued_by(
    position: ChainPosition,
    certificate: &X509Certificate<'_>,
    issuer: &X509Certificate<'_>,
) -> Result<(), JwsError> {
    let algorithm = &certificate.signature_algorithm.algorithm;
    if *algorithm != OID_SIG_ECDSA_WITH_SHA256 && *algorithm != OID_SIG_ECDSA_WITH_SHA384 {
        return Err(JwsError::ChainSignatureInvalid {
            position,
            reason: format!("signature algorithm {algorithm} is not ECDSA with SHA-256 or SHA-384"),
        });
    }
    if certificate.tbs_certificate.signature.algorithm != *algorithm {
        return Err(JwsError::ChainSignatureInvalid {
            position,
            reason: "the signed and outer signature algorithms differ".to_owned(),
        });
    }
    certificate
        .verify_signature(Some(issuer.public_key()))
        .map_err(|e| JwsError::ChainSignatureInvalid {
            position,
            reason: e.to_string(),
        })
}

fn has_extension(certificate: &X509Certificate<'_>, oid: &str) -> bool {
    certificate
        .iter_extensions()
        .any(|extension| extension.oid.to_id_string() == oid)
}

fn check_validity(
    position: ChainPosition,
    certificate: &X509Certificate<'_>,
    at: OffsetDateTime,
) -> Result<(), JwsError> {
    let validity = certificate.validity();
    let not_before = validity.not_before.to_datetime();
    let not_after = validity.not_after.to_datetime();
    if at < not_before {
        return Err(JwsError::CertificateNotYetValid {
            position,
            not_before: flowgate_domain::text::rfc3339(not_before),
            at: flowgate_domain::text::rfc3339(at),
        });
    }
    if at > not_after {
        return Err(JwsError::CertificateExpired {
            position,
            not_after: flowgate_domain::text::rfc3339(not_after),
            at: flowgate_domain::text::rfc3339(at),
        });
    }
    Ok(())
}

/// The payload's `signedDate` (milliseconds since the epoch) when it is a number that is a
/// date.
fn signing_date(payload: &Value) -> Option<OffsetDateTime> {
    let date = payload.get("signedDate")?;
    let millis = match date.as_i64() {
        Some(millis) => i128::from(millis),
        // A fractional or huge number: its whole milliseconds, when it is a date at all.
        None => date.as_f64().filter(|f| f.is_finite())?.trunc() as i128,
    };
    OffsetDateTime::from_unix_timestamp_nanos(millis.checked_mul(1_000_000)?).ok()
}

fn quoted_or_missing(value: Option<&str>) -> String {
    value.map_or_else(|| "missing".to_owned(), |value| format!("{value:?}"))
}

/// One PEM block: `der` in standard base64, 64 characters a line, between `label`'s lines.
pub(crate) fn pem_block(label: &str, der: &[u8]) -> String {
    let encoded = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    // Base64 is ASCII: 64-byte lines split on character boundaries.
    for line in encoded.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// A certificate's SHA-256 fingerprint, upper-case hex bytes separated by colons.
fn fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = String::with_capacity(digest.as_ref().len() * 3);
    for (i, byte) in digest.as_ref().iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        out.push_str(&format!("{byte:02X}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apple_demo_signer::DemoSigner;
    use crate::apple_test_chain::{TestChain, TestSigner};
    use ring::signature::EcdsaKeyPair;
    use serde_json::json;
    use time::Duration;

    fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    fn millis(at: OffsetDateTime) -> i64 {
        (at.unix_timestamp_nanos() / 1_000_000) as i64
    }

    fn payload() -> Value {
        json!({
            "notificationType": "SUBSCRIBED",
            "subtype": "INITIAL_BUY",
            "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
            "version": "2.0",
            "signedDate": millis(now()),
            "data": {"bundleId": "com.example.app", "environment": "Sandbox"},
        })
    }

    fn code(result: Result<Value, JwsError>) -> &'static str {
        match result {
            Ok(payload) => panic!("verified, expected an error: {payload}"),
            Err(e) => {
                // Every message is printable and names something.
                assert!(!e.to_string().is_empty());
                e.code()
            }
        }
    }

    fn parts(token: &str) -> Vec<String> {
        token.split('.').map(str::to_owned).collect()
    }

    fn header_of(signer: &TestSigner) -> Value {
        let token = signer.sign(&json!({}));
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts(&token)[0]).unwrap()).unwrap()
    }

    /// A token signed by the signer's leaf over this header and payload.
    fn forge(signer: &TestSigner, header: &Value, payload: &[u8]) -> String {
        signer.sign_parts(header.to_string().as_bytes(), payload)
    }

    #[test]
    fn valid_chain_of_a_test_root_returns_the_payload() {
        let signer = TestSigner::new();
        let payload = payload();
        let token = signer.sign(&payload);
        assert_eq!(verify(&signer.roots(), &token, now()).unwrap(), payload);
        // The header is exactly Apple's shape.
        let header = header_of(&signer);
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["x5c"].as_array().unwrap().len(), 3);
        assert_eq!(header.as_object().unwrap().len(), 2);
    }

    #[test]
    fn test_root_pem_loads_as_trusted_roots() {
        let signer = TestSigner::new();
        let roots = AppleRoots::from_pem(signer.root_pem().as_bytes()).unwrap();
        assert_eq!(roots, signer.roots());
        let token = signer.sign(&payload());
        assert!(verify(&roots, &token, now()).is_ok());
    }

    #[test]
    fn a_signer_written_as_pem_reads_back_and_signs_under_the_same_root() {
        let signer = TestSigner::new();
        let pem = signer.to_pem();
        let read = DemoSigner::from_pem(pem.as_bytes()).unwrap();
        assert_eq!(read.roots(), signer.roots());
        assert_eq!(read.to_pem(), pem);
        let payload = payload();
        let token = read.sign(&payload);
        assert_eq!(verify(&signer.roots(), &token, now()).unwrap(), payload);
        // Under another root, refused.
        let other = TestSigner::new();
        assert_eq!(
            verify(&other.roots(), &token, now()).unwrap_err().code(),
            "untrusted_root"
        );
    }

    #[test]
    fn a_signer_pem_missing_its_key_or_out_of_order_is_refused_naming_the_block() {
        let signer = TestSigner::new();
        let pem = signer.to_pem();
        let certificates = &pem[..pem.find("-----BEGIN PRIVATE KEY").unwrap()];
        let err = DemoSigner::from_pem(certificates.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("not 3"), "{err}");
        // The key first: block 0 is not a certificate.
        let reordered = format!(
            "{}{}",
            &pem[pem.find("-----BEGIN PRIVATE KEY").unwrap()..],
            certificates
        );
        let err = DemoSigner::from_pem(reordered.as_bytes()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("PEM block 0: a \"PRIVATE KEY\" block"),
            "{err}"
        );
        // Four certificates: the last is not a key.
        let err = DemoSigner::from_pem(format!("{certificates}{}", signer.root_pem()).as_bytes())
            .unwrap_err();
        assert!(err.to_string().starts_with("PEM block 3"), "{err}");
    }

    #[test]
    fn roots_and_roots_trust_both_once() {
        let (a, b) = (TestSigner::new(), TestSigner::new());
        let both = AppleRoots::apple()
            .and(&a.roots())
            .and(&a.roots())
            .and(&b.roots());
        assert_eq!(both.fingerprints().len(), 3);
        assert_eq!(
            both.fingerprints()[0],
            AppleRoots::apple().fingerprints()[0]
        );
        for signer in [&a, &b] {
            assert!(verify(&both, &signer.sign(&payload()), now()).is_ok());
        }
    }

    #[test]
    fn builtin_apple_root_parses_with_its_fingerprint() {
        let roots = AppleRoots::apple();
        assert_eq!(
            roots.fingerprints(),
            vec![concat!(
                "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:",
                "7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79"
            )]
        );
        let certificate = parse_certificate(&roots.ders[0]).unwrap();
        assert_eq!(
            certificate.subject().to_string(),
            "CN=Apple Root CA - G3, OU=Apple Certification Authority, O=Apple Inc., C=US"
        );
        // A test chain does not pass under Apple's root.
        let signer = TestSigner::new();
        assert_eq!(
            code(verify(&roots, &signer.sign(&payload()), now())),
            "untrusted_root"
        );
    }

    #[test]
    fn tampered_payload_fails_the_signature() {
        let signer = TestSigner::new();
        let token = signer.sign(&json!({"price": 1990, "signedDate": millis(now())}));
        let p = parts(&token);
        let mut payload = URL_SAFE_NO_PAD.decode(&p[1]).unwrap();
        let at = payload.iter().position(|&b| b == b'1').unwrap();
        payload[at] = b'9';
        let tampered = format!("{}.{}.{}", p[0], URL_SAFE_NO_PAD.encode(&payload), p[2]);
        assert_eq!(
            code(verify(&signer.roots(), &tampered, now())),
            "signature_invalid"
        );
    }

    #[test]
    fn tampered_header_fails_the_signature() {
        let signer = TestSigner::new();
        let token = signer.sign(&payload());
        let p = parts(&token);
        let mut header = header_of(&signer);
        header["kid"] = json!("other");
        let tampered = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            p[1],
            p[2]
        );
        assert_eq!(
            code(verify(&signer.roots(), &tampered, now())),
            "signature_invalid"
        );
    }

    #[test]
    fn chain_of_another_root_is_untrusted() {
        let trusted = TestSigner::new();
        let other = TestSigner::new();
        let token = other.sign(&payload());
        // Valid in itself...
        assert!(verify(&other.roots(), &token, now()).is_ok());
        // ...but not under the trusted root.
        assert_eq!(
            code(verify(&trusted.roots(), &token, now())),
            "untrusted_root"
        );
    }

    #[test]
    fn certificates_of_another_chain_fail_the_chain_signature() {
        // The trusted root placed at the end of another root's chain.
        let trusted = TestSigner::new();
        let other = TestSigner::new();
        let mut header = header_of(&other);
        header["x5c"][2] = json!(STANDARD.encode(&trusted.root_der));
        let token = forge(&other, &header, payload().to_string().as_bytes());
        let error = verify(&trusted.roots(), &token, now()).unwrap_err();
        assert_eq!(error.code(), "chain_signature_invalid");
        assert!(error.to_string().contains("intermediate"), "{error}");

        // Another chain's leaf before the trusted intermediate and root, signed by that leaf.
        let mut header = header_of(&trusted);
        header["x5c"][0] = json!(STANDARD.encode(&other.leaf_der));
        let token = forge(&other, &header, payload().to_string().as_bytes());
        let error = verify(&trusted.roots(), &token, now()).unwrap_err();
        assert!(
            matches!(
                error,
                JwsError::ChainSignatureInvalid {
                    position: ChainPosition::Leaf,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn leaf_without_apple_marker_is_refused() {
        let signer = TestSigner::with(TestChain {
            leaf_marker: false,
            ..TestChain::default()
        });
        assert_eq!(
            code(verify(&signer.roots(), &signer.sign(&payload()), now())),
            "leaf_marker_missing"
        );
    }

    #[test]
    fn intermediate_without_apple_marker_is_refused() {
        let signer = TestSigner::with(TestChain {
            intermediate_marker: false,
            ..TestChain::default()
        });
        assert_eq!(
            code(verify(&signer.roots(), &signer.sign(&payload()), now())),
            "intermediate_marker_missing"
        );
    }

    #[test]
    fn intermediate_not_a_ca_is_refused() {
        let signer = TestSigner::with(TestChain {
            intermediate_ca: false,
            ..TestChain::default()
        });
        assert_eq!(
            code(verify(&signer.roots(), &signer.sign(&payload()), now())),
            "intermediate_not_ca"
        );
    }

    #[test]
    fn alg_none_with_an_empty_signature_is_refused() {
        let signer = TestSigner::new();
        let mut header = header_of(&signer);
        header["alg"] = json!("none");
        let token = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(payload().to_string())
        );
        let error = verify(&signer.roots(), &token, now()).unwrap_err();
        assert_eq!(error.code(), "unsupported_alg");
        assert!(error.to_string().contains("\"none\""), "{error}");
    }

    #[test]
    fn alg_hs256_is_refused() {
        let signer = TestSigner::new();
        let mut header = header_of(&signer);
        header["alg"] = json!("HS256");
        let token = forge(&signer, &header, payload().to_string().as_bytes());
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "unsupported_alg"
        );
    }

    #[test]
    fn alg_missing_or_not_a_string_is_refused() {
        let signer = TestSigner::new();
        let mut header = header_of(&signer);
        header.as_object_mut().unwrap().remove("alg");
        let token = forge(&signer, &header, b"{}");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "unsupported_alg"
        );
        header["alg"] = json!(["ES256"]);
        let token = forge(&signer, &header, b"{}");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "unsupported_alg"
        );
    }

    #[test]
    fn crit_header_is_refused() {
        let signer = TestSigner::new();
        let mut header = header_of(&signer);
        header["crit"] = json!(["exp"]);
        let token = forge(&signer, &header, b"{}");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "header_malformed"
        );
    }

    #[test]
    fn expired_leaf_is_refused() {
        let signer = TestSigner::with(TestChain {
            leaf_not_before: now() - Duration::days(10),
            leaf_not_after: now() - Duration::days(5),
            ..TestChain::default()
        });
        let error = verify(&signer.roots(), &signer.sign(&payload()), now()).unwrap_err();
        assert_eq!(error.code(), "certificate_expired");
        assert!(error.to_string().contains("leaf"), "{error}");
    }

    #[test]
    fn not_yet_valid_leaf_is_refused() {
        let signer = TestSigner::with(TestChain {
            leaf_not_before: now() + Duration::days(5),
            leaf_not_after: now() + Duration::days(10),
            ..TestChain::default()
        });
        assert_eq!(
            code(verify(&signer.roots(), &signer.sign(&payload()), now())),
            "certificate_not_yet_valid"
        );
    }

    #[test]
    fn validity_is_judged_at_signed_date_else_now() {
        let signer = TestSigner::with(TestChain {
            leaf_not_before: now() - Duration::days(10),
            leaf_not_after: now() - Duration::days(5),
            ..TestChain::default()
        });
        let roots = signer.roots();
        // Signed while the leaf was valid, received after it expired: accepted.
        let then = json!({"signedDate": millis(now() - Duration::days(7))});
        assert!(verify(&roots, &signer.sign(&then), now()).is_ok());
        // No signedDate: judged at `now`.
        assert_eq!(
            code(verify(&roots, &signer.sign(&json!({})), now())),
            "certificate_expired"
        );
        assert!(verify(&roots, &signer.sign(&json!({})), now() - Duration::days(7)).is_ok());
        // A signedDate that is not a number does not count either.
        let text = json!({"signedDate": "1700000000000"});
        assert_eq!(
            code(verify(&roots, &signer.sign(&text), now())),
            "certificate_expired"
        );
    }

    #[test]
    fn missing_or_malformed_x5c_is_refused() {
        let signer = TestSigner::new();
        let mut header = header_of(&signer);
        header.as_object_mut().unwrap().remove("x5c");
        let token = forge(&signer, &header, b"{}");
        assert_eq!(code(verify(&signer.roots(), &token, now())), "x5c_missing");

        header["x5c"] = json!("MIIB");
        let token = forge(&signer, &header, b"{}");
        assert_eq!(code(verify(&signer.roots(), &token, now())), "x5c_missing");

        let mut header = header_of(&signer);
        header["x5c"][1] = json!(42);
        let token = forge(&signer, &header, b"{}");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "certificate_malformed"
        );

        let mut header = header_of(&signer);
        header["x5c"][0] = json!(STANDARD.encode(b"not a certificate"));
        let token = forge(&signer, &header, b"{}");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "certificate_malformed"
        );
    }

    #[test]
    fn x5c_of_two_or_no_certificates_is_refused() {
        let signer = TestSigner::new();
        let mut header = header_of(&signer);
        header["x5c"].as_array_mut().unwrap().remove(0);
        let token = forge(&signer, &header, b"{}");
        let error = verify(&signer.roots(), &token, now()).unwrap_err();
        assert_eq!(error, JwsError::X5cLength { count: 2 });
        assert_eq!(error.code(), "x5c_length");

        header["x5c"] = json!([]);
        let token = forge(&signer, &header, b"{}");
        assert_eq!(code(verify(&signer.roots(), &token, now())), "x5c_length");
    }

    #[test]
    fn signature_of_the_wrong_length_is_refused() {
        let signer = TestSigner::new();
        let p = parts(&signer.sign(&payload()));
        let mut signature = URL_SAFE_NO_PAD.decode(&p[2]).unwrap();
        signature.pop();
        let token = format!("{}.{}.{}", p[0], p[1], URL_SAFE_NO_PAD.encode(&signature));
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "signature_length"
        );
        // An ASN.1 DER signature (JOSE wants raw r || s) is refused too.
        let token = format!("{}.{}.{}", p[0], p[1], URL_SAFE_NO_PAD.encode([0x30u8; 70]));
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "signature_length"
        );
    }

    #[test]
    fn leaf_key_not_p256_is_refused() {
        let signer = TestSigner::with(TestChain {
            leaf_p384: true,
            ..TestChain::default()
        });
        assert_eq!(
            code(verify(&signer.roots(), &signer.sign(&payload()), now())),
            "leaf_key_not_p256"
        );
    }

    #[test]
    fn bad_base64_is_refused() {
        let signer = TestSigner::new();
        let token = signer.sign(&payload());
        let p = parts(&token);
        for (bad, part) in [
            (format!("{}!.{}.{}", p[0], p[1], p[2]), "header"),
            (format!("{}.{}*.{}", p[0], p[1], p[2]), "payload"),
            (format!("{}.{}.{}=", p[0], p[1], p[2]), "signature"),
            // Padded base64url is not the compact form.
            (format!("{}=.{}.{}", p[0], p[1], p[2]), "header"),
        ] {
            let error = verify(&signer.roots(), &bad, now()).unwrap_err();
            assert_eq!(error.code(), "bad_base64", "{bad}");
            assert!(matches!(error, JwsError::BadBase64 { part: found, .. } if found == part));
        }
        // x5c is standard base64, not base64url.
        let mut header = header_of(&signer);
        let leaf = header["x5c"][0].as_str().unwrap().replace(['+', '/'], "-");
        header["x5c"][0] = json!(format!("{leaf}-_"));
        let token = forge(&signer, &header, b"{}");
        assert_eq!(code(verify(&signer.roots(), &token, now())), "bad_base64");
    }

    #[test]
    fn oversized_token_is_refused_before_decoding() {
        let signer = TestSigner::new();
        let token = "!".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(
            verify(&signer.roots(), &token, now()).unwrap_err(),
            JwsError::TooLarge {
                len: MAX_TOKEN_BYTES + 1
            }
        );
        // A validly signed one just over the limit too.
        let big = json!({"pad": "x".repeat(MAX_TOKEN_BYTES)});
        assert_eq!(
            code(verify(&signer.roots(), &signer.sign(&big), now())),
            "too_large"
        );
    }

    #[test]
    fn not_three_parts_is_refused() {
        let signer = TestSigner::new();
        let token = signer.sign(&payload());
        for bad in [
            String::new(),
            "abc".to_owned(),
            token.rsplit_once('.').unwrap().0.to_owned(),
            format!("{token}.x"),
        ] {
            assert_eq!(
                code(verify(&signer.roots(), &bad, now())),
                "not_three_parts"
            );
        }
    }

    #[test]
    fn malformed_json_in_header_or_payload_is_refused() {
        let signer = TestSigner::new();
        let token = signer.sign_parts(b"{\"alg\":\"ES256\",", b"{}");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "header_malformed"
        );
        let token = signer.sign_parts(b"[\"ES256\"]", b"{}");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "header_malformed"
        );

        let header = header_of(&signer);
        let token = forge(&signer, &header, b"{\"signedDate\": 1");
        assert_eq!(
            code(verify(&signer.roots(), &token, now())),
            "payload_malformed"
        );
    }

    #[test]
    fn payload_not_an_object_is_refused() {
        let signer = TestSigner::new();
        for (payload, kind) in [
            (json!([1, 2]), "array"),
            (json!("x"), "string"),
            (json!(null), "null"),
        ] {
            let error = verify(&signer.roots(), &signer.sign(&payload), now()).unwrap_err();
            assert_eq!(error, JwsError::PayloadNotObject { found: kind });
            assert_eq!(error.code(), "payload_not_object");
        }
    }

    #[test]
    fn signature_by_another_p256_key_with_the_right_chain_fails() {
        let signer = TestSigner::new();
        let token = signer.sign(&payload());
        let (signing_input, _) = token.rsplit_once('.').unwrap();
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap();
        let other = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8.as_ref(),
            &rng,
        )
        .unwrap();
        let signature = other.sign(&rng, signing_input.as_bytes()).unwrap();
        let forged = format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        );
        assert_eq!(
            code(verify(&signer.roots(), &forged, now())),
            "signature_invalid"
        );
    }

    #[test]
    fn error_messages_quote_a_shortened_value() {
        let signer = TestSigner::new();
        let mut header = header_of(&signer);
        header["alg"] = json!("A".repeat(100));
        let token = forge(&signer, &header, b"{}");
        let message = verify(&signer.roots(), &token, now())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(&format!("\"{}…\"", "A".repeat(32))),
            "{message}"
        );
        assert!(!message.contains(&"A".repeat(33)), "{message}");
    }

    #[test]
    fn roots_from_pem_files_name_the_file_and_the_fault() {
        let dir = tempfile::tempdir().unwrap();
        let signer = TestSigner::new();
        let good = dir.path().join("good.pem");
        std::fs::write(&good, signer.root_pem()).unwrap();
        let apple = dir.path().join("apple.pem");
        std::fs::write(&apple, APPLE_ROOT_CA_G3_PEM).unwrap();
        let roots = AppleRoots::from_pem_files(&[good.clone(), apple.clone()]).unwrap();
        assert_eq!(roots.fingerprints().len(), 2);
        assert!(verify(&roots, &signer.sign(&payload()), now()).is_ok());

        let missing = dir.path().join("missing.pem");
        let error = AppleRoots::from_pem_files(&[good.clone(), missing.clone()]).unwrap_err();
        assert_eq!(error.path(), Some(missing.as_path()));
        assert!(error.to_string().contains("missing.pem"), "{error}");

        let key = dir.path().join("key.pem");
        std::fs::write(&key, rcgen::KeyPair::generate().unwrap().serialize_pem()).unwrap();
        let error = AppleRoots::from_pem_files(std::slice::from_ref(&key)).unwrap_err();
        assert_eq!(error.path(), Some(key.as_path()));
        assert!(error.to_string().contains("PRIVATE KEY"), "{error}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let error = AppleRoots::from_pem_files(std::slice::from_ref(&empty)).unwrap_err();
        assert!(error.to_string().contains("empty.pem"), "{error}");
        assert!(error.to_string().contains("no PEM certificate"), "{error}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let error = AppleRoots::from_pem_files(&[garbage]).unwrap_err();
        assert!(error.to_string().contains("garbage.pem"), "{error}");
        assert!(error.to_string().contains("not an X.509"), "{error}");

        assert!(matches!(
            AppleRoots::from_pem_files(&[]),
            Err(RootError::Empty)
        ));
    }
}
