//! The demo's App Store signer (D30): signs notifications as the App Store does, with a chain
//! of Apple's shape (P-384 root and intermediate, P-256 leaf, Apple's marker extensions) under
//! a root generated for it, which [`crate::apple_jws::verify`] accepts only where that root is
//! trusted ([`DemoSigner::roots`]), never with [`AppleRoots::apple`].
//!
//! Why this is production code, with `rcgen` a dependency of the release binary: in
//! development `flowgate serve` creates the demo's signer file (`stores.demo_apple_signer`)
//! when it is missing and trusts its root beside Apple's, and `flowgate demo --traffic` signs
//! its buyers' notifications with it; both are commands of the release binary. Staging and
//! production refuse the setting, so no deployment trusts a demo root, and nothing but the
//! demo signs. The chains of forged shapes that the tests refuse are not here: they are
//! `apple_test_chain`'s, behind the feature `test-util`.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::signature::{self, EcdsaKeyPair};
use serde_json::Value;
use time::OffsetDateTime;
use x509_parser::pem::Pem;

use crate::apple_jws::{parse_certificate, pem_block, AppleRoots, RootError};

/// How long before and after their creation generated certificates are valid.
const VALIDITY: time::Duration = time::Duration::days(3650);

/// The shape of a generated chain: [`ChainShape::apple`] is Apple's, the one the demo uses;
/// `apple_test_chain` changes it to forge the chains the tests refuse.
#[derive(Debug, Clone)]
pub(crate) struct ChainShape {
    /// Whether the intermediate carries the intermediate marker extension.
    pub(crate) intermediate_marker: bool,
    /// Whether the intermediate is a CA.
    pub(crate) intermediate_ca: bool,
    /// Whether the leaf carries the leaf marker extension.
    pub(crate) leaf_marker: bool,
    /// Whether the leaf's key is P-384 instead of P-256.
    pub(crate) leaf_p384: bool,
    /// The start of the leaf's validity.
    pub(crate) leaf_not_before: OffsetDateTime,
    /// The end of the leaf's validity.
    pub(crate) leaf_not_after: OffsetDateTime,
}

impl ChainShape {
    /// Apple's shape, the leaf valid from ten years before now to ten years after.
    pub(crate) fn apple() -> Self {
        let now = OffsetDateTime::now_utc();
        Self {
            intermediate_marker: true,
            intermediate_ca: true,
            leaf_marker: true,
            leaf_p384: false,
            leaf_not_before: now - VALIDITY,
            leaf_not_after: now + VALIDITY,
        }
    }
}

/// Signs payloads as the App Store does, under a root of its own (see the module's doc).
#[derive(Debug)]
pub struct DemoSigner {
    pub(crate) root_der: Vec<u8>,
    pub(crate) intermediate_der: Vec<u8>,
    pub(crate) leaf_der: Vec<u8>,
    /// The leaf's private key, PKCS#8 DER (what [`DemoSigner::to_pem`] writes).
    leaf_pkcs8: Vec<u8>,
    leaf_key: EcdsaKeyPair,
    rng: ring::rand::SystemRandom,
}

impl DemoSigner {
    /// A chain of Apple's shape under a new root. An error says what failed (the operating
    /// system's random generator, for the keys).
    pub fn generate() -> Result<Self, String> {
        Self::generate_shaped(&ChainShape::apple())
    }

    /// A chain of the given shape under a new root.
    pub(crate) fn generate_shaped(chain: &ChainShape) -> Result<Self, String> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, CustomExtension, DnType, IsCa,
            KeyPair, KeyUsagePurpose,
        };

        fn params(name: &str, ca: bool, markers: &[&[u64]]) -> CertificateParams {
            let mut params = CertificateParams::default();
            params.distinguished_name = rcgen::DistinguishedName::new();
            params
                .distinguished_name
                .push(DnType::CommonName, format!("flowgate test {name}"));
            let now = OffsetDateTime::now_utc();
            params.not_before = now - VALIDITY;
            params.not_after = now + VALIDITY;
            if ca {
                params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
                params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            } else {
                params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            }
            // Apple's markers carry an ASN.1 NULL.
            params.custom_extensions = markers
                .iter()
                .map(|oid| CustomExtension::from_oid_content(oid, vec![0x05, 0x00]))
                .collect();
            params
        }
        let err = |e: rcgen::Error| e.to_string();

        let root_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).map_err(err)?;
        let root =
            CertifiedIssuer::self_signed(params("root", true, &[]), root_key).map_err(err)?;

        let intermediate_markers: &[&[u64]] = if chain.intermediate_marker {
            &[&[1, 2, 840, 113635, 100, 6, 2, 1]]
        } else {
            &[]
        };
        let intermediate_key =
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).map_err(err)?;
        let intermediate = CertifiedIssuer::signed_by(
            params("intermediate", chain.intermediate_ca, intermediate_markers),
            intermediate_key,
            &root,
        )
        .map_err(err)?;

        let leaf_markers: &[&[u64]] = if chain.leaf_marker {
            &[&[1, 2, 840, 113635, 100, 6, 11, 1]]
        } else {
            &[]
        };
        let (rcgen_alg, signing_alg) = if chain.leaf_p384 {
            (
                &rcgen::PKCS_ECDSA_P384_SHA384,
                &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
            )
        } else {
            (
                &rcgen::PKCS_ECDSA_P256_SHA256,
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            )
        };
        let leaf_key = KeyPair::generate_for(rcgen_alg).map_err(err)?;
        let mut leaf_params = params("leaf", false, leaf_markers);
        leaf_params.not_before = chain.leaf_not_before;
        leaf_params.not_after = chain.leaf_not_after;
        let leaf = leaf_params
            .signed_by(&leaf_key, &intermediate)
            .map_err(err)?;

        let rng = ring::rand::SystemRandom::new();
        let leaf_pkcs8 = leaf_key.serialize_der();
        let leaf_key =
            EcdsaKeyPair::from_pkcs8(signing_alg, &leaf_pkcs8, &rng).map_err(|e| e.to_string())?;
        Ok(Self {
            root_der: root.der().to_vec(),
            intermediate_der: intermediate.der().to_vec(),
            leaf_der: leaf.der().to_vec(),
            leaf_pkcs8,
            leaf_key,
            rng,
        })
    }

    /// The whole signer as one PEM text, for a signer that outlives its process (`flowgate
    /// serve` trusts the root, `flowgate demo --traffic` signs): the root, intermediate and
    /// leaf `CERTIFICATE`s, then the leaf's `PRIVATE KEY` (PKCS#8). The root's key is not
    /// kept: nothing signs with it again. [`DemoSigner::from_pem`] reads it back.
    pub fn to_pem(&self) -> String {
        [
            ("CERTIFICATE", &self.root_der),
            ("CERTIFICATE", &self.intermediate_der),
            ("CERTIFICATE", &self.leaf_der),
            ("PRIVATE KEY", &self.leaf_pkcs8),
        ]
        .into_iter()
        .map(|(label, der)| pem_block(label, der))
        .collect()
    }

    /// A signer as [`DemoSigner::to_pem`] wrote it: three `CERTIFICATE` blocks (root,
    /// intermediate, leaf) and the leaf's P-256 `PRIVATE KEY`, in that order. An error says
    /// which block is wrong.
    pub fn from_pem(pem: &[u8]) -> Result<Self, RootError> {
        let mut blocks = Vec::new();
        for (index, block) in Pem::iter_from_buffer(pem).enumerate() {
            let block = block.map_err(|e| RootError::Pem {
                index,
                reason: e.to_string(),
            })?;
            blocks.push(block);
        }
        let expected = ["CERTIFICATE", "CERTIFICATE", "CERTIFICATE", "PRIVATE KEY"];
        if blocks.len() != expected.len() {
            return Err(RootError::Pem {
                index: blocks.len().min(expected.len()),
                reason: format!(
                    "a signer has {} PEM blocks (root, intermediate and leaf certificates, the \
                     leaf's private key), not {}",
                    expected.len(),
                    blocks.len()
                ),
            });
        }
        for (index, (block, label)) in blocks.iter().zip(expected).enumerate() {
            if block.label != label {
                return Err(RootError::Pem {
                    index,
                    reason: format!("a {:?} block, not a {label}", block.label),
                });
            }
            if label == "CERTIFICATE" {
                parse_certificate(&block.contents)
                    .map_err(|reason| RootError::Certificate { index, reason })?;
            }
        }
        let rng = ring::rand::SystemRandom::new();
        let leaf_pkcs8 = blocks[3].contents.clone();
        let leaf_key = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &leaf_pkcs8,
            &rng,
        )
        .map_err(|e| RootError::Pem {
            index: 3,
            reason: format!("not a P-256 private key: {e}"),
        })?;
        Ok(Self {
            root_der: blocks[0].contents.clone(),
            intermediate_der: blocks[1].contents.clone(),
            leaf_der: blocks[2].contents.clone(),
            leaf_pkcs8,
            leaf_key,
            rng,
        })
    }

    /// The root, as PEM: what `stores.apple_root_certificates` names to trust it.
    pub fn root_pem(&self) -> String {
        pem_block("CERTIFICATE", &self.root_der)
    }

    /// The root, as trusted roots for [`crate::apple_jws::verify`].
    pub fn roots(&self) -> AppleRoots {
        AppleRoots::from_ders(vec![self.root_der.clone()])
    }

    /// `payload` signed as the App Store signs: a compact JWS whose header is
    /// `{"alg":"ES256","x5c":[leaf,intermediate,root]}` (standard base64 DER).
    ///
    /// # Panics
    ///
    /// When the operating system's random generator fails (ECDSA's nonce).
    pub fn sign(&self, payload: &Value) -> String {
        let header = serde_json::json!({
            "alg": "ES256",
            "x5c": [
                STANDARD.encode(&self.leaf_der),
                STANDARD.encode(&self.intermediate_der),
                STANDARD.encode(&self.root_der),
            ],
        });
        self.sign_parts(
            header.to_string().as_bytes(),
            payload.to_string().as_bytes(),
        )
    }

    /// A compact JWS of these header and payload bytes, signed with the leaf's key.
    pub(crate) fn sign_parts(&self, header: &[u8], payload: &[u8]) -> String {
        let mut token = URL_SAFE_NO_PAD.encode(header);
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(payload));
        let signature = match self.leaf_key.sign(&self.rng, token.as_bytes()) {
            Ok(signature) => signature,
            Err(_) => panic!("cannot sign the App Store payload: no random bytes"),
        };
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(signature.as_ref()));
        token
    }
}
