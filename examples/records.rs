//! Typed records, canonical wire bytes, strict decoding and the config store.
//!
//! `cargo run --example records`

use std::collections::BTreeSet;
use std::sync::Arc;

use flechtwerk::attribute::{set, Attribute, INT, STR};
use flechtwerk::testing::ConfigBootstrap;
use flechtwerk::testing::{Observed, RecordingObserver};
use flechtwerk::wire::{self, InvalidMessageAction, RawRecord};
use flechtwerk::{token_for, Event, Message, State};

const COUNT: Attribute<i64> = Attribute::new("count", &INT);
const TAGS: Attribute<BTreeSet<String>> = Attribute::new("tags", &set(STR));
const URL: Attribute<String> = Attribute::new("url", &STR);

fn record(offset: i64, key: &str, value: Option<&[u8]>) -> RawRecord {
    RawRecord {
        topic: Arc::from("configs"),
        partition: 0,
        offset,
        timestamp_ms: None,
        key: Some(key.as_bytes().to_vec().into()),
        value: value.map(|v| v.to_vec().into()),
        headers: Vec::new(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Typed state, canonical bytes: sorted keys, sets sorted, no spaces.
    let mut state = State::new();
    state.set(&COUNT, 41)?;
    state.set(&TAGS, BTreeSet::from(["zeta".to_owned(), "alpha".to_owned()]))?;
    println!("state bytes: {}", String::from_utf8(state.encode()?)?);

    // A message: key as raw UTF-8, value as canonical JSON.
    let out = Message::new("counts", "tenant/a", Event::new().with(&COUNT, 42)?);
    println!("message key {:?}, value {:?}", out.encode_key()?, out.encode_value()?);

    // Ownership tokens: Kafka's default partitioner.
    println!("token_for(\"tenant/a\", 8) = {}", token_for("tenant/a", 8));

    // A config topic with a superseded value, a deletion, and one broken record that the
    // policy skips (and counts).
    let observer = RecordingObserver::default();
    let skip = |_: &wire::InvalidMessageError| InvalidMessageAction::Skip;
    let mut bootstrap = ConfigBootstrap::new();
    for r in [
        record(0, "a", Some(br#"{"url":"https://old"}"#)),
        record(1, "a", Some(br#"{ "url" : "https://new" }"#)),
        record(2, "b", Some(br#"{"url":"https://b"}"#)),
        record(3, "b", Some(b"{}")),
        record(4, "c", Some(b"[not an object]")),
    ] {
        bootstrap.offer(&r, &skip, &observer)?;
    }
    let store = bootstrap.finish_unenriched(&skip, &observer)?;
    println!("config keys: {:?}", store.keys());
    println!("config a url: {:?}", store.get("a")?.map(|c| c.get(&URL)));
    let skipped = observer.events().iter().filter(|e| matches!(e, Observed::MessageInvalid { .. })).count();
    println!("invalid records counted: {skipped}");
    Ok(())
}
