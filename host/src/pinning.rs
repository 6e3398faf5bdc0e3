//! What a plugin ConfigMap may load beyond being a valid component: the digest it is pinned
//! to (the `wasmloop.dev/digest` annotation), and, when the host trusts keys
//! (`--trusted-keys`), a minisign signature over the component by one of them
//! (`data["plugin.wasm.minisig"]`).
//!
//! Both are checked against the component as the host will compile it (decompressed), so
//! what was pinned or signed is what runs. A refusal leaves the serving version in place.
//!
//! ```
//! use wasmloop::pinning::{self, PinError};
//! let component = b"\0asm";
//! let pin = format!("sha256:{}", wasmloop_sandbox::digest(component));
//! assert!(pinning::check(component, Some(&pin), None, None).is_ok());
//! let other = pinning::check(b"\0asm-other", Some(&pin), None, None);
//! assert!(matches!(other, Err(PinError::DigestMismatch { .. })));
//! ```

use std::path::{Path, PathBuf};

use base64::Engine as _;
use minisign_verify::{PublicKey, Signature};

use crate::input::InputError;

/// The annotation pinning a plugin ConfigMap to one component digest.
pub const DIGEST_ANNOTATION: &str = "wasmloop.dev/digest";
/// The `data` key of the component's minisign signature (the `.minisig` file's text).
pub const SIGNATURE_KEY: &str = "plugin.wasm.minisig";
/// A trusted-keys file larger than this is not a list of keys.
const KEYS_FILE_LIMIT: u64 = 64 << 10;
/// The most keys one host trusts.
const MAX_KEYS: usize = 256;

/// Why a text holds no list of keys to trust: the host would otherwise load no signed plugin,
/// or any.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// A line that is no minisign public key.
    #[error("line {line}: {why}; expected a minisign public key (RW…)")]
    NotAKey {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// More keys than one host trusts (256): a list that long is no operator's choice.
    #[error("more than {MAX_KEYS} keys; trust fewer")]
    TooMany,
    /// Nothing but comments.
    #[error("no minisign public key in it; put the keys' minisign.pub files there")]
    NoKey,
}

/// Why `--trusted-keys` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeysFileError {
    /// The file cannot be read, or is no bounded text file.
    #[error(transparent)]
    Read(#[from] InputError),
    /// The file holds no list of keys.
    #[error("{}: {error}", .path.display())]
    Keys {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        error: KeysError,
    },
}

/// The minisign public keys whose signatures the host accepts.
pub struct TrustedKeys {
    keys: Vec<(String, PublicKey)>,
}

impl TrustedKeys {
    /// Reads `path`: minisign public key files (`minisign.pub`) one after the other, or bare
    /// base64 keys, one per line; `untrusted comment:` lines, `#` comments and blank lines are
    /// skipped.
    ///
    /// # Errors
    /// A [`KeysFileError`]: a file that cannot be read, is too large, holds no key or too
    /// many, or a line that is no minisign public key (its number is named).
    pub fn read(path: &Path) -> Result<TrustedKeys, KeysFileError> {
        let text = crate::input::read_bounded(path, KEYS_FILE_LIMIT, "a file of minisign public keys")?;
        TrustedKeys::parse(&text).map_err(|error| KeysFileError::Keys { path: path.to_owned(), error })
    }

    /// The keys in `text`, as [`TrustedKeys::read`] reads a file.
    ///
    /// # Errors
    /// A [`KeysError`]: no key, too many, or a line that is no minisign public key.
    pub fn parse(text: &str) -> Result<TrustedKeys, KeysError> {
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with("untrusted comment:") {
                continue;
            }
            let fail = |why: String| KeysError::NotAKey { line: number + 1, why };
            let key = PublicKey::from_base64(line).map_err(|e| fail(e.to_string()))?;
            let id = key_id(line).ok_or_else(|| fail("not base64".to_owned()))?;
            keys.push((id, key));
            if keys.len() > MAX_KEYS {
                return Err(KeysError::TooMany);
            }
        }
        if keys.is_empty() {
            return Err(KeysError::NoKey);
        }
        Ok(TrustedKeys { keys })
    }

    /// The key ids, as minisign prints them.
    pub fn ids(&self) -> String {
        self.keys.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// Why a component may not load.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The annotation is no digest.
    #[error(
        "the annotation {DIGEST_ANNOTATION} is {0:?}, not sha256:<64 lowercase hex digits>; set it to the digest `wasmloop bundle` writes, or remove it"
    )]
    BadPin(String),
    /// The component is not the one pinned.
    #[error(
        "the component's digest is sha256:{actual}, but the annotation {DIGEST_ANNOTATION} pins {expected}; ship the pinned component, or pin this one (`wasmloop bundle` writes the annotation)"
    )]
    DigestMismatch {
        /// The pin.
        expected: String,
        /// The component's digest, hex.
        actual: String,
    },
    /// Keys are trusted and nothing is signed.
    #[error(
        "the host requires a minisign signature by a trusted key ({trusted}) in data[\"{SIGNATURE_KEY}\"], and there is none; sign the component (`minisign -S -m plugin.wasm`) and bundle it with `--signature plugin.wasm.minisig`"
    )]
    Unsigned {
        /// The trusted key ids.
        trusted: String,
    },
    /// The signature text does not parse.
    #[error(
        "data[\"{SIGNATURE_KEY}\"] is not a minisign signature ({0}); put there the file `minisign -S` writes (`wasmloop bundle --signature`)"
    )]
    BadSignature(String),
    /// Signed, by a key the host does not trust.
    #[error(
        "the component is signed by key {signer}, which is not trusted (trusted: {trusted}); sign it with a trusted key, or add that key's minisign.pub to --trusted-keys"
    )]
    UntrustedKey {
        /// The signing key's id.
        signer: String,
        /// The trusted key ids.
        trusted: String,
    },
    /// Signed by a trusted key, but not this component.
    #[error(
        "the signature by key {signer} does not verify over this component ({why}); the component changed after signing, or the signature is another file's: sign this component"
    )]
    Invalid {
        /// The signing key's id.
        signer: String,
        /// What minisign-verify said.
        why: String,
    },
}

impl PinError {
    /// The reason of the `PluginRejected` Event.
    pub fn reason(&self) -> &'static str {
        match self {
            PinError::BadPin(_) | PinError::DigestMismatch { .. } => "DigestMismatch",
            _ => "SignatureRejected",
        }
    }
}

/// Checks `component` against its pin (the annotation's text) and, when keys are trusted,
/// against `signature` (the `.minisig` text).
///
/// # Errors
/// The first check that fails.
pub fn check(
    component: &[u8],
    pin: Option<&str>,
    signature: Option<&str>,
    trusted: Option<&TrustedKeys>,
) -> Result<(), PinError> {
    if let Some(pin) = pin {
        let expected = parse_pin(pin)?;
        let actual = wasmloop_sandbox::digest(component);
        if actual != expected {
            return Err(PinError::DigestMismatch { expected: pin.to_owned(), actual });
        }
    }
    let Some(trusted) = trusted else { return Ok(()) };
    let text = signature.ok_or_else(|| PinError::Unsigned { trusted: trusted.ids() })?;
    let parsed = Signature::decode(text).map_err(|e| PinError::BadSignature(e.to_string()))?;
    let (signer, key) = signer(text, trusted)?;
    // Legacy (not prehashed) signatures are refused, as minisign itself now makes none.
    key.verify(component, &parsed, false).map_err(|e| PinError::Invalid { signer, why: e.to_string() })
}

/// The checks of [`check`] that need no component: a well-formed pin, and a signature there
/// when keys are trusted. A referenced component is checked so before it is pulled.
///
/// # Errors
/// The first check that fails.
pub fn check_without_component(
    pin: Option<&str>,
    signature: Option<&str>,
    trusted: Option<&TrustedKeys>,
) -> Result<(), PinError> {
    if let Some(pin) = pin {
        parse_pin(pin)?;
    }
    let (Some(trusted), signature) = (trusted, signature) else { return Ok(()) };
    let text = signature.ok_or_else(|| PinError::Unsigned { trusted: trusted.ids() })?;
    Signature::decode(text).map_err(|e| PinError::BadSignature(e.to_string()))?;
    // A signer the host does not trust is refused before the component is fetched.
    signer(text, trusted).map(drop)
}

/// The trusted key that made `signature`.
fn signer<'a>(signature: &str, trusted: &'a TrustedKeys) -> Result<(String, &'a PublicKey), PinError> {
    let signer = signature_key_id(signature).ok_or_else(|| PinError::BadSignature("no signature line".into()))?;
    match trusted.keys.iter().find(|(id, _)| *id == signer) {
        Some((_, key)) => Ok((signer, key)),
        None => Err(PinError::UntrustedKey { signer, trusted: trusted.ids() }),
    }
}

/// The hex digest a pin names.
fn parse_pin(pin: &str) -> Result<&str, PinError> {
    match pin.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => {
            Ok(hex)
        }
        // Echoed into the status and an Event: cut, as an annotation may hold 256 KiB.
        _ => Err(PinError::BadPin(pin.chars().take(80).collect())),
    }
}

/// The pin `bundle` writes for `component`.
pub fn pin_of(component: &[u8]) -> String {
    format!("sha256:{}", wasmloop_sandbox::digest(component))
}

/// A key or signature line's key id, as minisign prints it: its 8 key-number bytes (after the
/// 2 algorithm bytes), read little-endian, in hex.
fn key_id(base64_line: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(base64_line.trim()).ok()?;
    let number: [u8; 8] = bytes.get(2..10)?.try_into().ok()?;
    Some(format!("{:016X}", u64::from_le_bytes(number)))
}

/// The key id of a `.minisig` text: from its second line, the one `Signature::decode` reads.
pub fn signature_key_id(text: &str) -> Option<String> {
    key_id(text.lines().nth(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made with the real tool: `minisign -G -W` for each key, then
    /// `minisign -S -s key -m component` (see `fixtures/minisign/README`).
    fn fixture(name: &str) -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/minisign/");
        std::fs::read_to_string(format!("{dir}{name}")).unwrap()
    }

    fn component() -> Vec<u8> {
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/minisign/component")).unwrap()
    }

    #[test]
    fn pins_and_signatures_are_checked_as_the_table_says() {
        let trusted = TrustedKeys::parse(&fixture("trusted.pub")).unwrap();
        let (good, other) = (fixture("component.minisig"), fixture("component.other-key.minisig"));
        let pin = pin_of(&component());
        let wrong_pin = format!("sha256:{}", "0".repeat(64));
        let tampered = [component().as_slice(), b"!"].concat();
        // name, component, pin, signature, keys trusted, the refusal expected
        type Case<'a> = (&'a str, &'a [u8], Option<&'a str>, Option<&'a str>, bool, Option<&'a str>);
        let cases: [Case; 10] = [
            ("nothing asked", &component(), None, None, false, None),
            ("the pinned component", &component(), Some(&pin), None, false, None),
            ("another component", &component(), Some(&wrong_pin), None, false, Some("DigestMismatch")),
            ("a pin in capitals", &component(), Some(&pin.to_uppercase()), None, false, Some("BadPin")),
            ("a pin without its algorithm", &component(), Some(&pin[7..]), None, false, Some("BadPin")),
            ("signed by a trusted key", &component(), Some(&pin), Some(&good), true, None),
            ("unsigned", &component(), None, None, true, Some("Unsigned")),
            ("signed by another key", &component(), None, Some(&other), true, Some("UntrustedKey")),
            ("changed after signing", &tampered, None, Some(&good), true, Some("Invalid")),
            ("not a signature", &component(), None, Some("hello"), true, Some("BadSignature")),
        ];
        for (name, component, pin, signature, trust, refused) in cases {
            let got = check(component, pin, signature, trust.then_some(&trusted));
            let kind = got.as_ref().err().map(|e| format!("{e:?}"));
            let kind = kind.as_deref().map(|k| k.split([' ', '(', '{']).next().unwrap());
            assert_eq!(kind, refused, "{name}: {got:?}");
        }
    }

    #[test]
    fn what_needs_no_component_is_refused_before_a_pull() {
        let trusted = TrustedKeys::parse(&fixture("trusted.pub")).unwrap();
        let (good, pin) = (fixture("component.minisig"), pin_of(&component()));
        let other = fixture("component.other-key.minisig");
        type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, bool, Option<&'a str>);
        let cases: [Case; 8] = [
            ("signed by a key nobody trusts", None, Some(&other), true, Some("UntrustedKey")),
            ("nothing asked", None, None, false, None),
            ("a well-formed pin: its match needs the bytes", Some(&pin), None, false, None),
            ("a pin in capitals", Some(&pin.to_uppercase()), None, false, Some("BadPin")),
            ("unsigned where keys are trusted", None, None, true, Some("Unsigned")),
            ("a signature: its check needs the bytes", None, Some(&good), true, None),
            ("not a signature", None, Some("hello"), true, Some("BadSignature")),
            ("a signature where no key is trusted", None, Some("hello"), false, None),
        ];
        for (name, pin, signature, trust, refused) in cases {
            let got = check_without_component(pin, signature, trust.then_some(&trusted));
            let kind = got.as_ref().err().map(|e| format!("{e:?}"));
            let kind = kind.as_deref().map(|k| k.split([' ', '(', '{']).next().unwrap());
            assert_eq!(kind, refused, "{name}: {got:?}");
        }
    }

    #[test]
    fn a_refusal_names_the_keys_and_digests_involved() {
        let trusted = TrustedKeys::parse(&fixture("trusted.pub")).unwrap();
        let other = fixture("component.other-key.minisig");
        let error = check(&component(), None, Some(&other), Some(&trusted)).unwrap_err().to_string();
        let signer = signature_key_id(&other).unwrap();
        assert!(error.contains(&signer) && error.contains(&trusted.ids()), "{error}");
        let wrong = format!("sha256:{}", "0".repeat(64));
        let error = check(&component(), Some(&wrong), None, None).unwrap_err().to_string();
        assert!(error.contains(&wrong) && error.contains(&wasmloop_sandbox::digest(&component())), "{error}");
    }

    #[test]
    fn key_ids_read_as_minisign_prints_them() {
        // minisign names each key by id in the untrusted comment of its .pub file.
        let text = fixture("trusted.pub");
        let comment = text.lines().next().unwrap();
        let id = key_id(text.lines().nth(1).unwrap()).unwrap();
        assert!(comment.ends_with(&id), "{comment} / {id}");
    }

    #[test]
    fn a_trusted_keys_file_that_is_not_one_is_refused_naming_the_line() {
        let error = TrustedKeys::parse("untrusted comment: x\nRWQnot-a-key\n").err().unwrap();
        assert!(matches!(error, KeysError::NotAKey { line: 2, .. }), "{error:?}");
        assert!(error.to_string().starts_with("line 2:"), "{error}");
        let error = TrustedKeys::parse("# nothing\n\n").err().unwrap();
        assert!(error.to_string().contains("no minisign public key"), "{error}");
    }
}
