//! The changelog position a task's store records with each batch of changes, and the rules by
//! which a starting task reuses a local copy or discards it (STO-05).
//!
//! A store holds only committed state (it takes a batch's changes after the transaction
//! committed), so a copy is never ahead of its changelog, only behind: replaying the changelog
//! from the recorded position to the restore's end brings it to exactly the state a restore
//! from the start would give — provided the changelog still holds every record from that
//! position on, and is the changelog the copy was written from. [`judge`] checks what the
//! engine can see of that. (A crash during a restore leaves a copy ahead of its checkpoint by
//! records of the changelog after that position: the replay from the checkpoint writes each of
//! their keys again, so the same holds.)

use crate::kafka::Extent;
use crate::state::Checkpoint;

/// What a checkpoint says: the store reflects every record of changelog partition `partition`
/// (of `partitions`) of `application_id` below `next_offset`, and every record at or after it
/// was appended at or after `since_ms` (milliseconds since the Unix epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) application_id: String,
    pub(crate) changelog: String,
    pub(crate) partition: i32,
    pub(crate) partitions: u32,
    pub(crate) next_offset: i64,
    pub(crate) since_ms: i64,
}

/// The first line of an encoded position (its format's version).
const MAGIC: &str = "flechtwerk.checkpoint.1";

impl Position {
    /// One field per line; a field with a line break (an application id could hold one) makes
    /// the checkpoint unreadable on decoding, so such a copy is discarded, never misread.
    pub(crate) fn encode(&self) -> Checkpoint {
        let text = format!(
            "{MAGIC}\n{}\n{}\n{}\n{}\n{}\n{}",
            self.application_id, self.changelog, self.partition, self.partitions, self.next_offset, self.since_ms
        );
        Checkpoint::from_bytes(text.into_bytes())
    }

    /// The position a checkpoint encodes, or why it cannot be read.
    pub(crate) fn decode(checkpoint: &Checkpoint) -> Result<Position, String> {
        let text = std::str::from_utf8(checkpoint.as_bytes()).map_err(|_| "an unreadable checkpoint".to_owned())?;
        let fields: Vec<&str> = text.split('\n').collect();
        let [magic, application_id, changelog, partition, partitions, next_offset, since_ms] = fields[..] else {
            return Err("an unreadable checkpoint".to_owned());
        };
        if magic != MAGIC {
            return Err(format!("a checkpoint of another format ({magic:?})"));
        }
        let number = |field: &str| field.parse::<i64>().map_err(|_| "an unreadable checkpoint".to_owned());
        Ok(Position {
            application_id: application_id.to_owned(),
            changelog: changelog.to_owned(),
            partition: i32::try_from(number(partition)?).map_err(|_| "an unreadable checkpoint")?,
            partitions: u32::try_from(number(partitions)?).map_err(|_| "an unreadable checkpoint")?,
            next_offset: number(next_offset)?,
            since_ms: number(since_ms)?,
        })
    }
}

/// The task a copy is judged for: what its checkpoint must name.
pub(crate) struct Expected<'a> {
    pub(crate) application_id: &'a str,
    pub(crate) changelog: &'a str,
    pub(crate) partition: i32,
    pub(crate) partitions: u32,
}

/// Whether a copy whose checkpoint is `checkpoint` may be reused by the task `expected`, whose
/// changelog partition spans `extent` (looked up after the fence) at `now_ms`: the offset to
/// restore from, or why the copy must be discarded.
pub(crate) fn judge(
    checkpoint: &Checkpoint,
    expected: &Expected<'_>,
    extent: Extent,
    now_ms: i64,
    max_age_ms: i64,
) -> Result<i64, String> {
    let position = Position::decode(checkpoint)?;
    if position.application_id != expected.application_id || position.changelog != expected.changelog {
        return Err(format!(
            "written by application {:?} from changelog {:?}",
            position.application_id, position.changelog
        ));
    }
    if position.partition != expected.partition {
        return Err(format!("written by the task of partition {}", position.partition));
    }
    if position.partitions != expected.partitions {
        return Err(format!(
            "written while the changelog had {} partitions (now {})",
            position.partitions, expected.partitions
        ));
    }
    if position.next_offset < extent.start {
        return Err(format!(
            "the changelog's log start {} is past the copy's position {} (records deleted, or the topic recreated)",
            extent.start, position.next_offset
        ));
    }
    if position.next_offset > extent.end {
        return Err(format!(
            "the copy's position {} is beyond the changelog's end {} (the changelog truncated or recreated)",
            position.next_offset, extent.end
        ));
    }
    let age_ms = now_ms.saturating_sub(position.since_ms);
    if age_ms >= max_age_ms {
        return Err(format!(
            "the copy is {} s old, the reuse bound is {} s (a delete it missed may have been compacted away)",
            age_ms / 1000,
            max_age_ms / 1000
        ));
    }
    Ok(position.next_offset)
}

/// Milliseconds since the Unix epoch (the simulation's clock under madsim).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn position() -> Position {
        Position {
            application_id: "counter".into(),
            changelog: "counter-changelog".into(),
            partition: 3,
            partitions: 8,
            next_offset: 100,
            since_ms: 1_000_000,
        }
    }

    fn expected() -> Expected<'static> {
        Expected { application_id: "counter", changelog: "counter-changelog", partition: 3, partitions: 8 }
    }

    const HOUR: i64 = 3_600_000;

    /// STO-05: a copy is reused from its position when everything it names matches and the
    /// changelog still holds its tail; each mismatch discards it, saying why.
    #[test]
    fn sto_05_reuse_and_every_reason_to_discard() {
        let judged = |p: Position, extent: Extent, now: i64| judge(&p.encode(), &expected(), extent, now, 12 * HOUR);
        let extent = Extent { start: 0, end: 150 };
        assert_eq!(judged(position(), extent, 1_000_000 + HOUR), Ok(100));
        assert_eq!(
            judged(position(), Extent { start: 100, end: 100 }, 1_000_000),
            Ok(100),
            "at the end, nothing to read"
        );
        let reason = |p: Position, extent: Extent, now: i64| judged(p, extent, now).unwrap_err();
        assert!(reason(Position { application_id: "other".into(), ..position() }, extent, 0).contains("application"));
        assert!(reason(Position { changelog: "x".into(), ..position() }, extent, 0).contains("changelog"));
        assert!(reason(Position { partition: 4, ..position() }, extent, 0).contains("partition 4"));
        assert!(reason(Position { partitions: 4, ..position() }, extent, 0).contains("4 partitions"));
        assert!(reason(position(), Extent { start: 101, end: 150 }, 0).contains("log start 101"));
        assert!(reason(position(), Extent { start: 0, end: 99 }, 0).contains("beyond the changelog's end 99"));
        assert!(reason(position(), extent, 1_000_000 + 12 * HOUR).contains("reuse bound"));
        assert!(
            judge(&position().encode(), &expected(), extent, 1_000_000, 0).is_err(),
            "a bound of zero never reuses"
        );
        let garbage = Checkpoint::from_bytes(b"\xff garbage".to_vec());
        assert!(judge(&garbage, &expected(), extent, 0, HOUR).unwrap_err().contains("unreadable"));
        let other = Checkpoint::from_bytes(b"flechtwerk.checkpoint.9\na\nb\n1\n2\n3\n4".to_vec());
        assert!(judge(&other, &expected(), extent, 0, HOUR).unwrap_err().contains("another format"));
    }

    proptest! {
        /// STO-05: positions round-trip; an application id with a line break never decodes
        /// into another position.
        #[test]
        fn sto_05_positions_round_trip(
            application_id in "[a-z.\n-]{0,12}",
            partition in 0i32..1000,
            partitions in 1u32..1000,
            next_offset in 0i64..i64::MAX,
            since_ms in 0i64..i64::MAX,
        ) {
            let position = Position {
                changelog: format!("{application_id}-changelog"),
                application_id,
                partition,
                partitions,
                next_offset,
                since_ms,
            };
            match Position::decode(&position.encode()) {
                Ok(decoded) => prop_assert_eq!(decoded, position),
                Err(_) => prop_assert!(position.application_id.contains('\n')),
            }
        }
    }
}
