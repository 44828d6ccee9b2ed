//! What travels between the simulated clients and the broker: subscription filters in their
//! wire form, and PUBLISH packets.

use flechtwerk::mqtt::{Publish, QoS};

use super::broker::Held;

/// A subscription filter as sent (`$share/{group}/{filter}` or a plain filter): its share group
/// and its filter.
pub(super) fn parse_wire(wire: &str) -> (Option<String>, String) {
    match wire.strip_prefix("$share/") {
        Some(rest) => match rest.split_once('/') {
            Some((group, filter)) => (Some(group.to_owned()), filter.to_owned()),
            None => (None, wire.to_owned()),
        },
        None => (None, wire.to_owned()),
    }
}

/// The PUBLISH packet of `held` on connection `connection`.
pub(super) fn publish_of(held: &Held, packet_id: u16, dup: bool, connection: u64) -> Publish {
    Publish {
        topic: held.topic.clone(),
        payload: held.payload.clone(),
        qos: QoS::AtLeastOnce,
        packet_id,
        dup,
        connection,
    }
}
