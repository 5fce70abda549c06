//! The SHA-256 digest that identifies an object's bytes.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::ObjectError;

/// A SHA-256 digest, printed and parsed as 64 lower-case hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// The digest of `bytes` (for small inputs; large objects are hashed while streaming).
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Wraps raw digest bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// The digest of everything `reader` yields, read in chunks of `chunk_bytes`.
pub(crate) fn hash_reader(
    reader: &mut impl std::io::Read,
    chunk_bytes: usize,
) -> std::io::Result<Sha256Digest> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; chunk_bytes.max(4096)];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Sha256Digest(hasher.finalize().into()))
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({self})")
    }
}

impl FromStr for Sha256Digest {
    type Err = ObjectError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| ObjectError::InvalidDigest(s.to_string()))?;
        Ok(Self(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_known_input_matches_the_published_test_vector() {
        assert_eq!(
            Sha256Digest::of(b"abc").to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn digests_parse_back_from_hex_and_reject_anything_else() {
        let d = Sha256Digest::of(b"oxidelake");
        assert_eq!(d.to_string().parse::<Sha256Digest>().unwrap(), d);
        assert!("abc".parse::<Sha256Digest>().is_err());
        assert!("zz".repeat(32).parse::<Sha256Digest>().is_err());
    }
}
