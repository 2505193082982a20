//! Secrets encrypted at rest, as kube-apiserver's `aesgcm` provider stores them: a stored
//! value is `k8s:enc:aesgcm:v1:<key name>:`, a random 12-byte nonce, then the AES-GCM
//! ciphertext with its tag. The value's location in the store is the authenticated data, so
//! a value copied to another key does not decrypt. The first key of the key file encrypts and
//! every key decrypts, so keys rotate. A value without the prefix reads as plaintext, as
//! kube's `identity` provider: encryption turned on over a store with Secrets in it reads
//! them, and each is encrypted when next written. A value read with any key but the first,
//! or as plaintext while a key encrypts, is stale: as kube's transformers say so, the store
//! then writes it again on an update even when the object is unchanged. Both stores pass
//! values through here.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, Generate, KeyInit, Nonce, Payload};
use aes_gcm::aes::Aes192;
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm};
use base64::Engine;
use shared::model::Kind;

/// What every encrypted value begins with, before its key's name.
const PREFIX: &[u8] = b"k8s:enc:aesgcm:v1:";
const NONCE_LEN: usize = 12;

type Aes192Gcm = AesGcm<Aes192, U12>;

#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    #[error("cannot read the encryption key file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// Never holds the line itself: it may hold a key.
    #[error("the encryption key file {path}, line {line}: {why}")]
    Line { path: PathBuf, line: usize, why: String },
    #[error("the encryption key file {path} holds no key: write one `name:<base64 of 16, 24 or 32 random bytes>` a line")]
    Empty { path: PathBuf },
    #[error("failed to decrypt: it was encrypted with the key {name:?}, which the encryption key file does not hold")]
    UnknownKey { name: String },
    #[error(
        "failed to decrypt with the key {name:?}: the value is damaged, was copied from another object, or the key is not the one it was written with"
    )]
    Unauthentic { name: String },
    #[error("failed to encrypt: no random nonce: {0}")]
    Random(String),
}

/// A stored value read back: the object's bytes, and whether a write would store them
/// otherwise (read with a key other than the one that encrypts, or stored as plaintext).
pub(super) struct Opened<'a> {
    pub(super) value: Cow<'a, [u8]>,
    pub(super) stale: bool,
}

/// The keys Secrets are encrypted with; none: every value is stored as it is.
#[derive(Clone, Default)]
pub struct Encryption {
    keys: Arc<[DataKey]>,
}

struct DataKey {
    name: String,
    cipher: Cipher,
}

/// AES-GCM with the key's length: AES-128, AES-192 or AES-256, as kube accepts them.
enum Cipher {
    Aes128(Box<Aes128Gcm>),
    Aes192(Box<Aes192Gcm>),
    Aes256(Box<Aes256Gcm>),
}

impl Cipher {
    fn new(secret: &[u8]) -> Option<Cipher> {
        match secret.len() {
            16 => Aes128Gcm::new_from_slice(secret).ok().map(|c| Cipher::Aes128(Box::new(c))),
            24 => Aes192Gcm::new_from_slice(secret).ok().map(|c| Cipher::Aes192(Box::new(c))),
            32 => Aes256Gcm::new_from_slice(secret).ok().map(|c| Cipher::Aes256(Box::new(c))),
            _ => None,
        }
    }

    fn encrypt(&self, nonce: &Nonce<Aes128Gcm>, payload: Payload<'_, '_>) -> Result<Vec<u8>, aes_gcm::Error> {
        match self {
            Cipher::Aes128(c) => c.encrypt(nonce, payload),
            Cipher::Aes192(c) => c.encrypt(nonce, payload),
            Cipher::Aes256(c) => c.encrypt(nonce, payload),
        }
    }

    fn decrypt(&self, nonce: &Nonce<Aes128Gcm>, payload: Payload<'_, '_>) -> Result<Vec<u8>, aes_gcm::Error> {
        match self {
            Cipher::Aes128(c) => c.decrypt(nonce, payload),
            Cipher::Aes192(c) => c.decrypt(nonce, payload),
            Cipher::Aes256(c) => c.decrypt(nonce, payload),
        }
    }
}

/// Names only: a key's bytes never reach a log.
impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encryption").field("keys", &self.key_names().collect::<Vec<_>>()).finish()
    }
}

impl Encryption {
    /// Reads the key file `path` (see [`Encryption::parse`]).
    pub fn from_file(path: &Path) -> Result<Encryption, EncryptionError> {
        let text = std::fs::read_to_string(path).map_err(|source| EncryptionError::Read { path: path.to_path_buf(), source })?;
        Encryption::parse(path, &text)
    }

    /// A key file: one `name:<base64 of 16, 24 or 32 bytes>` a line, the first the one that
    /// encrypts; blank lines and lines starting with `#` are skipped. A name is letters,
    /// digits, `-`, `_` and `.`, and is used once.
    pub fn parse(path: &Path, text: &str) -> Result<Encryption, EncryptionError> {
        let mut keys: Vec<(usize, DataKey)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line_number = index + 1;
            let bad = |why: String| EncryptionError::Line { path: path.to_path_buf(), line: line_number, why };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, secret)) = line.split_once(':') else {
                return Err(bad("write `name:<base64 of the key>`".into()));
            };
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
                return Err(bad("a key's name is one or more letters, digits, '-', '_' or '.'".into()));
            }
            if let Some((first, _)) = keys.iter().find(|(_, key)| key.name == name) {
                return Err(bad(format!("the key name {name:?} is on line {first} already")));
            }
            // The decoder's own message would quote a byte of the key.
            let secret = base64::engine::general_purpose::STANDARD
                .decode(secret.trim())
                .map_err(|_| bad(format!("the key {name:?} is not valid base64")))?;
            let cipher = Cipher::new(&secret)
                .ok_or_else(|| bad(format!("the key {name:?} is {} bytes; AES-GCM takes 16, 24 or 32", secret.len())))?;
            keys.push((line_number, DataKey { name: name.to_string(), cipher }));
        }
        if keys.is_empty() {
            return Err(EncryptionError::Empty { path: path.to_path_buf() });
        }
        Ok(Encryption { keys: keys.into_iter().map(|(_, key)| key).collect() })
    }

    /// Whether values are encrypted (a key file was given).
    pub fn is_on(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The keys' names, the one that encrypts first.
    pub fn key_names(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|key| key.name.as_str())
    }

    /// Whether values of `kind` go through the keys: Secrets alone (kube-apiserver chooses
    /// its resources in its configuration; Secrets are the ones that hold what must stay secret).
    fn covers(kind: Kind) -> bool {
        kind == Kind::Secret
    }

    /// What to store for `value`, an object of `kind` kept at `location`.
    pub(super) fn seal(&self, kind: Kind, location: &str, value: Vec<u8>) -> Result<Vec<u8>, EncryptionError> {
        let Some(key) = self.keys.first().filter(|_| Encryption::covers(kind)) else {
            return Ok(value);
        };
        let nonce = Nonce::<Aes128Gcm>::try_generate().map_err(|e| EncryptionError::Random(e.to_string()))?;
        let sealed = key
            .cipher
            .encrypt(&nonce, Payload { msg: &value, aad: location.as_bytes() })
            .map_err(|_| EncryptionError::Random("AES-GCM refused the value".into()))?;
        let mut stored = Vec::with_capacity(PREFIX.len() + key.name.len() + 1 + NONCE_LEN + sealed.len());
        stored.extend_from_slice(PREFIX);
        stored.extend_from_slice(key.name.as_bytes());
        stored.push(b':');
        stored.extend_from_slice(&nonce);
        stored.extend_from_slice(&sealed);
        Ok(stored)
    }

    /// The value stored as `stored` for an object of `kind` at `location`: decrypted when it
    /// carries the prefix, as it is otherwise.
    pub(super) fn open<'a>(&self, kind: Kind, location: &str, stored: &'a [u8]) -> Result<Opened<'a>, EncryptionError> {
        if !Encryption::covers(kind) {
            return Ok(Opened { value: Cow::Borrowed(stored), stale: false });
        }
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(Opened { value: Cow::Borrowed(stored), stale: self.is_on() });
        };
        let (name, sealed) = match rest.iter().position(|b| *b == b':') {
            Some(colon) => (String::from_utf8_lossy(&rest[..colon]).into_owned(), &rest[colon + 1..]),
            None => (String::from_utf8_lossy(rest).into_owned(), &[][..]),
        };
        let Some(position) = self.keys.iter().position(|key| key.name == name) else {
            return Err(EncryptionError::UnknownKey { name });
        };
        let key = &self.keys[position];
        let unauthentic = || EncryptionError::Unauthentic { name: name.clone() };
        if sealed.len() < NONCE_LEN {
            return Err(unauthentic());
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        let nonce = <&Nonce<Aes128Gcm>>::try_from(nonce).map_err(|_| unauthentic())?;
        let value = key.cipher.decrypt(nonce, Payload { msg: ciphertext, aad: location.as_bytes() }).map_err(|_| unauthentic())?;
        Ok(Opened { value: Cow::Owned(value), stale: position != 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = br#"{"data":{"password":"czNjcmV0"}}"#;

    fn keys(text: &str) -> Encryption {
        Encryption::parse(Path::new("keys"), text).unwrap()
    }

    fn line_error(text: &str) -> String {
        Encryption::parse(Path::new("keys"), text).expect_err("a bad key file is refused").to_string()
    }

    const K1: &str = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // 32 bytes
    const K2: &str = "k2:MDEyMzQ1Njc4OWFiY2RlZg=="; // 16 bytes
    const K3: &str = "k3:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"; // 24 bytes

    #[test]
    fn a_secret_is_stored_as_kubes_aesgcm_provider_stores_it_and_reads_back() {
        let encryption = keys(K1);
        let stored = encryption.seal(Kind::Secret, "/registry/secrets/default/db", SECRET.to_vec()).unwrap();
        assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        assert_eq!(stored.len(), "k8s:enc:aesgcm:v1:k1:".len() + 12 + SECRET.len() + 16, "nonce, ciphertext and tag");
        assert!(!stored.windows(8).any(|w| w == b"czNjcmV0"), "no plaintext");
        let again = encryption.seal(Kind::Secret, "/registry/secrets/default/db", SECRET.to_vec()).unwrap();
        assert_ne!(stored, again, "a fresh nonce each time");
        let opened = encryption.open(Kind::Secret, "/registry/secrets/default/db", &stored).unwrap();
        assert_eq!((&*opened.value, opened.stale), (SECRET, false));
    }

    #[test]
    fn a_value_copied_to_another_location_does_not_decrypt() {
        let encryption = keys(K1);
        let stored = encryption.seal(Kind::Secret, "/secrets/default/db", SECRET.to_vec()).unwrap();
        let error = encryption.open(Kind::Secret, "/secrets/default/other", &stored).err().expect("it does not decrypt");
        assert!(matches!(error, EncryptionError::Unauthentic { ref name } if name == "k1"), "{error}");
        let mut damaged = stored.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert!(encryption.open(Kind::Secret, "/secrets/default/db", &damaged).is_err());
        assert!(encryption.open(Kind::Secret, "/secrets/default/db", b"k8s:enc:aesgcm:v1:k1:short").is_err());
    }

    #[test]
    fn keys_rotate_the_first_encrypts_and_every_one_decrypts() {
        let old = keys(K2);
        let written = old.seal(Kind::Secret, "/s", SECRET.to_vec()).unwrap();
        let rotated = keys(&format!("{K1}\n{K2}\n"));
        let opened = rotated.open(Kind::Secret, "/s", &written).unwrap();
        assert_eq!(&*opened.value, SECRET, "the old key still decrypts");
        assert!(opened.stale, "read with a key that no longer encrypts");
        let rewritten = rotated.seal(Kind::Secret, "/s", SECRET.to_vec()).unwrap();
        assert!(rewritten.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        assert!(!rotated.open(Kind::Secret, "/s", &rewritten).unwrap().stale);
        let error = keys(K3).open(Kind::Secret, "/s", &written).err().expect("it does not decrypt");
        assert_eq!(
            error.to_string(),
            "failed to decrypt: it was encrypted with the key \"k2\", which the encryption key file does not hold"
        );
        let none = Encryption::default().open(Kind::Secret, "/s", &written).err().expect("it does not decrypt");
        assert!(matches!(none, EncryptionError::UnknownKey { .. }), "{none}");
    }

    #[test]
    fn plaintext_reads_as_it_is_and_only_secrets_are_encrypted() {
        let encryption = keys(K3);
        let opened = encryption.open(Kind::Secret, "/s", SECRET).unwrap();
        assert_eq!((&*opened.value, opened.stale), (SECRET, true), "a Secret written before encryption, encrypted when written");
        assert!(!Encryption::default().open(Kind::Secret, "/s", SECRET).unwrap().stale, "no key: plaintext is current");
        assert!(!encryption.open(Kind::ConfigMap, "/c", SECRET).unwrap().stale);
        assert_eq!(encryption.seal(Kind::ConfigMap, "/c", SECRET.to_vec()).unwrap(), SECRET);
        assert_eq!(Encryption::default().seal(Kind::Secret, "/s", SECRET.to_vec()).unwrap(), SECRET);
        assert!(!Encryption::default().is_on() && encryption.is_on());
    }

    #[test]
    fn a_bad_key_file_is_refused_naming_the_line_and_never_the_key() {
        let read = keys(&format!("# rotated on 2026-12-01\n\n{K1}\n  {K2}  \n"));
        assert_eq!(read.key_names().collect::<Vec<_>>(), ["k1", "k2"]);
        assert_eq!(format!("{read:?}"), r#"Encryption { keys: ["k1", "k2"] }"#);
        assert_eq!(line_error("k1:not*base64"), "the encryption key file keys, line 1: the key \"k1\" is not valid base64");
        assert_eq!(line_error("\nk1:MDEy"), "the encryption key file keys, line 2: the key \"k1\" is 3 bytes; AES-GCM takes 16, 24 or 32");
        assert_eq!(line_error(&format!("{K1}\n{K1}")), "the encryption key file keys, line 2: the key name \"k1\" is on line 1 already");
        assert!(line_error("MDEyMzQ1Njc4OWFiY2RlZg==").contains("line 1: write `name:<base64 of the key>`"));
        assert!(line_error(":MDEyMzQ1Njc4OWFiY2RlZg==").contains("line 1: a key's name"));
        assert!(line_error("k 1:MDEyMzQ1Njc4OWFiY2RlZg==").contains("line 1: a key's name"));
        assert!(line_error("# nothing\n\n").contains("holds no key"));
        for text in ["k1:not*base64", "k1:MDEy"] {
            assert!(!line_error(text).contains(text.split_once(':').unwrap().1), "the key's text stays out of the message");
        }
    }
}
