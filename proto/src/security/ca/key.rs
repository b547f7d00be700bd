//! Private keys read from PEM as Istio's files hold them: PKCS#8 (`PRIVATE KEY`), PKCS#1
//! (`RSA PRIVATE KEY`, what `openssl genrsa` and istiod's own tooling write) and SEC1
//! (`EC PRIVATE KEY`). ring reads only PKCS#8, so the other two are wrapped in a PKCS#8
//! envelope first. Errors say which form was found, never the bytes.

use rcgen::KeyPair;

const RSA_ENCRYPTION: &[u8] = &[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
];
const NULL: &[u8] = &[0x05, 0x00];
const EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];

/// Reads one private key; `Err` is the reason, for the caller to prefix with the file.
pub(crate) fn key_pair_from_pem(pem: &str) -> Result<KeyPair, String> {
    let blocks = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM ({e})"))?;
    let [block] = blocks.as_slice() else {
        return Err(format!(
            "expected one PEM private key block, found {}",
            blocks.len()
        ));
    };
    let der = block.contents.as_slice();
    let unreadable = |form: &str| {
        format!("the {form} private key could not be read (unsupported algorithm or corrupt)")
    };
    match block.label.as_str() {
        "PRIVATE KEY" => KeyPair::try_from(der).map_err(|_| unreadable("PKCS#8")),
        "RSA PRIVATE KEY" => {
            let pkcs8 = pkcs8(&[RSA_ENCRYPTION, NULL].concat(), der);
            KeyPair::try_from(pkcs8.as_slice()).map_err(|_| unreadable("PKCS#1 RSA"))
        }
        "EC PRIVATE KEY" => [P256, P384]
            .iter()
            .find_map(|curve| {
                let pkcs8 = pkcs8(&[EC_PUBLIC_KEY, curve].concat(), der);
                KeyPair::try_from(pkcs8.as_slice()).ok()
            })
            .ok_or_else(|| unreadable("SEC1 EC (P-256 or P-384)")),
        other => Err(format!(
            "a PEM block {other:?} where a private key was expected"
        )),
    }
}

/// `PrivateKeyInfo { version 0, AlgorithmIdentifier { alg_params }, OCTET STRING key }`.
fn pkcs8(alg_params: &[u8], key: &[u8]) -> Vec<u8> {
    let version = [0x02, 0x01, 0x00];
    let alg = tlv(0x30, alg_params);
    let key = tlv(0x04, key);
    tlv(0x30, &[&version[..], &alg, &key].concat())
}

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkcs8_and_sec1_keys_are_read() {
        let key = KeyPair::generate().unwrap();
        let pkcs8_pem = key.serialize_pem();
        let read = key_pair_from_pem(&pkcs8_pem).unwrap();
        assert_eq!(read.public_key_raw(), key.public_key_raw());
        // SEC1 (`openssl ecparam -genkey`): the ECPrivateKey inside the PKCS#8 envelope.
        let pkcs8_der = key.serialize_der();
        let (_, info) = x509_parser::der_parser::parse_der(&pkcs8_der).unwrap();
        let seq = info.as_sequence().unwrap();
        let sec1 = seq[2].as_slice().unwrap();
        use base64::Engine;
        let sec1_pem = format!(
            "-----BEGIN EC PRIVATE KEY-----\n{}\n-----END EC PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(sec1)
        );
        let read = key_pair_from_pem(&sec1_pem).unwrap();
        assert_eq!(read.public_key_raw(), key.public_key_raw());
        // A PKCS#8 body under the SEC1 label is not SEC1: refused with the form named.
        let wrong = pkcs8_pem.replace("PRIVATE KEY", "EC PRIVATE KEY");
        assert!(key_pair_from_pem(&wrong).unwrap_err().contains("SEC1"));
    }

    #[test]
    fn garbage_is_refused_without_echoing_it() {
        let err =
            key_pair_from_pem("-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n")
                .unwrap_err();
        assert!(err.contains("PKCS#8"), "{err}");
        assert!(!err.contains("c2VjcmV0"), "{err}");
        assert!(
            key_pair_from_pem("nothing")
                .unwrap_err()
                .contains("found 0")
        );
    }

    #[test]
    fn long_lengths_are_encoded_in_long_form() {
        assert_eq!(tlv(0x04, &[0; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(tlv(0x04, &[0; 300])[..4], [0x04, 0x82, 0x01, 0x2c]);
    }
}
