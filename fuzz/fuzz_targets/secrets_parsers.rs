//! The secrets parsers (feature `secrets`): any text as a keyring document, a protected-keyring
//! candidate, a `flenc:` token and a `flsig:` token never panics; a document that loads writes a
//! file that loads to the same keyring; nothing but a genuine token opens.
#![no_main]

use std::sync::OnceLock;

use flechtwerk::secrets::{is_protected_keyring, kid_of, read_header, signer_of, Keyring};
use libfuzzer_sys::fuzz_target;

fn keyring() -> &'static Keyring {
    static KEYRING: OnceLock<Keyring> = OnceLock::new();
    KEYRING.get_or_init(|| {
        Keyring::builder()
            .oct("oct", &[0x11; 32])
            .primary("oct")
            .generate_x25519("rec")
            .bind("rec", ["api"])
            .primary_for("api", "rec")
            .generate_ed25519("sig")
            .bind("sig", ["api"])
            .signing_for("api", "sig")
            .build()
            .expect("a valid keyring")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(parsed) = Keyring::from_json(text) {
        let written = parsed.to_json();
        assert_eq!(Keyring::from_json(&written).expect("a written keyring loads"), parsed);
    }
    let _ = is_protected_keyring(text);
    let _ = kid_of(text);
    let _ = signer_of(text);
    let _ = read_header(text);
    let keyring = keyring();
    for scope in ["", "api", "db"] {
        // Random text never carries a valid tag or signature under these keys.
        assert!(keyring.decrypt(text, scope).is_err());
    }
    assert!(keyring.verify(text, "api").is_err());
    // Prefixed, the same bytes reach the JOSE parsers past the envelope.
    assert!(keyring.decrypt(&format!("flenc:jwe:{text}"), "api").is_err());
    assert!(keyring.verify(&format!("flsig:jws:{text}"), "api").is_err());
});
