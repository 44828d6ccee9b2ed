//! Ownership tokens: Kafka's default partitioner, computed consumer-side (EXT-30).

/// Kafka's `Utils.murmur2`: MurmurHash2 (32-bit) with Kafka's seed `0x9747b28c`, bit for bit.
///
/// ```
/// // Kafka's own unit test (UtilsTest.testMurmur2): "21" hashes to -973932308.
/// assert_eq!(flechtwerk::murmur2(b"21"), -973932308);
/// ```
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The token (partition number) Kafka's default partitioner picks for `key` among `tokens`:
/// `toPositive(murmur2(utf8(key))) % tokens`, where `toPositive` clears the sign bit.
///
/// This is a compatibility promise: an extractor fleet shards its configs by it, so changing it
/// would remap ownership across every replica.
///
/// ```
/// use flechtwerk::token_for;
/// assert!(token_for("tenant/channel", 8) < 8);
/// assert_eq!(token_for("anything", 1), 0);
/// ```
///
/// # Panics
/// When `tokens` is zero (there is no token space).
pub fn token_for(key: &str, tokens: u32) -> u32 {
    assert!(tokens > 0, "token_for needs at least one token");
    (murmur2(key.as_bytes()) as u32 & 0x7fff_ffff) % tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors from Kafka's `UtilsTest.testMurmur2` (clients/src/test/java/org/apache/kafka/
    /// common/utils/UtilsTest.java), which checks `Utils.murmur2` on these inputs.
    #[test]
    fn ext_30_kafka_murmur2_vectors() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
            (b"abc", 479470107),
        ];
        for (input, want) in cases {
            assert_eq!(murmur2(input), want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn ext_30_to_positive_clears_only_the_sign_bit() {
        // murmur2("21") is negative: toPositive keeps the low 31 bits.
        let h = murmur2(b"21");
        assert!(h < 0);
        assert_eq!(token_for("21", u32::MAX), (h & 0x7fff_ffff) as u32);
    }
}
