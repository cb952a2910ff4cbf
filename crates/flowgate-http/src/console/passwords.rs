//! Console passwords (D28): argon2id, stored as PHC strings (`$argon2id$v=19$m=...`), each with
//! a random salt. The parameters are OWASP's minimum for argon2id (19 MiB, 2 passes, one lane):
//! about 25 ms a check on one core here, which bounds what a flood of sign-ins costs (they are
//! limited per address and per account besides). A stored hash names its own parameters, so
//! raising them later keeps older hashes valid.
//!
//! The `argon2` crate (RustCrypto) does the work; nothing here is home-made but the policy.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

/// Fewest characters of a password (D28).
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Most bytes of a password: longer ones are refused before hashing, so one request cannot
/// make the hash read megabytes.
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// argon2id with OWASP's minimum parameters.
fn argon2() -> Argon2<'static> {
    // 19 MiB, 2 iterations, 1 lane: valid parameters, so `new` cannot fail.
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Why a new password is refused, in words for the person choosing it.
pub fn check_new(password: &str) -> Result<(), String> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_CHARS {
        return Err(format!(
            "A password has at least {MIN_PASSWORD_CHARS} characters; this one has {chars}."
        ));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(format!(
            "A password has at most {MAX_PASSWORD_BYTES} bytes; this one has {}.",
            password.len()
        ));
    }
    if password.trim().is_empty() || password.chars().any(char::is_control) {
        return Err("A password cannot be blank or hold control characters.".to_owned());
    }
    Ok(())
}

/// The PHC string of `password` under a fresh salt.
pub fn hash(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| format!("cannot hash the password: {e}"))
}

/// Whether `password` is the one `stored` (a PHC string) was made from. A stored value that is
/// not a PHC string matches nothing. Without a stored hash (an unknown person, or one who has
/// not set a password) a hash is still computed, so the answer takes as long either way.
pub fn verify(password: &str, stored: Option<&str>) -> bool {
    if password.len() > MAX_PASSWORD_BYTES {
        return false;
    }
    match stored.map(PasswordHash::new) {
        Some(Ok(parsed)) => argon2()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        _ => {
            let _ = hash(password);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_hash_is_argon2id_salted_and_verifies_only_its_password() {
        let a = hash("correct horse battery").unwrap();
        let b = hash("correct horse battery").unwrap();
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "each hash has its own salt");
        assert!(verify("correct horse battery", Some(&a)));
        assert!(verify("correct horse battery", Some(&b)));
        assert!(!verify("correct horse batterY", Some(&a)));
        assert!(!verify("correct horse battery", Some("not a phc string")));
        assert!(!verify("correct horse battery", None));
    }

    #[test]
    fn new_passwords_have_twelve_characters_and_a_bounded_length() {
        assert!(check_new("twelve chars").is_ok());
        let short = check_new("eleven char").unwrap_err();
        assert!(short.contains("12") && short.contains("11"), "{short}");
        // Characters, not bytes: eleven two-byte characters are still too short.
        assert!(check_new(&"é".repeat(11)).is_err());
        assert!(check_new(&"é".repeat(12)).is_ok());
        assert!(check_new(&"x".repeat(MAX_PASSWORD_BYTES + 1)).is_err());
        assert!(check_new("            ").is_err());
        assert!(check_new("twelve\nchars!").is_err());
    }
}
