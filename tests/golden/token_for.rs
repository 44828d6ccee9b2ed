//! `token_for`: the extractor's ownership hash is Kafka's default partitioner, bit for bit
//! (EXT-30).

use flechtwerk::json::Value;
use flechtwerk::{murmur2, token_for};

use crate::vectors::{category, field, int, items, text_of, to_hex};

/// EXT-30: `token_for` is Kafka's default partitioner, bit for bit.
#[test]
fn ext_30_token_for_matches_python_and_kafka() {
    let token = category("token_for");
    for case in items(field(token, "cases")) {
        let key = text_of(case, "key");
        assert_eq!(to_hex(key.as_bytes()), text_of(case, "key_hex"), "{key:?}: UTF-8 bytes");
        let hash = murmur2(key.as_bytes());
        assert_eq!(i64::from(hash), int(field(case, "murmur2_signed")), "{key:?}: murmur2");
        assert_eq!(i64::from(hash as u32), int(field(case, "murmur2_unsigned")), "{key:?}: unsigned");
        assert_eq!(i64::from(hash & 0x7fff_ffff), int(field(case, "positive")), "{key:?}: positive");
        let Value::Object(tokens) = field(case, "token_for") else { panic!("token_for map") };
        for (n, want) in tokens {
            let n: u32 = n.parse().expect("token count");
            assert_eq!(i64::from(token_for(key, n)), int(want), "token_for({key:?}, {n})");
        }
    }
    for case in items(field(field(token, "kafka_utils_test_murmur2"), "cases")) {
        let key = text_of(case, "key");
        assert_eq!(i64::from(murmur2(key.as_bytes())), int(field(case, "murmur2_signed")), "Kafka UtilsTest {key:?}");
    }
}
