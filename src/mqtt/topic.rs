//! MQTT topic filters: matching a topic name against a filter (MQTT 5, section 4.7), and the
//! checks a filter must pass before it goes on the wire.

/// Whether `topic` (a concrete topic name) matches `filter` (a topic filter with `+` and `#`
/// wildcards), as an MQTT 5 broker decides it.
///
/// - `+` matches exactly one level (possibly empty), `#` the rest of the levels (zero or more;
///   `a/#` matches `a` too).
/// - A topic starting with `$` (`$SYS/...`) is not matched by a filter starting with a wildcard.
///
/// ```
/// use flechtwerk::mqtt::matches;
/// assert!(matches("site/+/events", "site/a1/events"));
/// assert!(matches("site/#", "site"));
/// assert!(!matches("site/+", "site/a1/events"));
/// assert!(!matches("#", "$SYS/broker/version"));
/// ```
pub fn matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
        return false;
    }
    let mut levels = topic.split('/');
    for part in filter.split('/') {
        match part {
            "#" => return true,
            "+" => {
                if levels.next().is_none() {
                    return false;
                }
            }
            literal => {
                if levels.next() != Some(literal) {
                    return false;
                }
            }
        }
    }
    levels.next().is_none()
}

/// Checks a topic filter: non-empty, no NUL, `+` and `#` only as whole levels, `#` only last.
///
/// ```
/// use flechtwerk::mqtt::validate_filter;
/// assert!(validate_filter("site/+/readings").is_ok());
/// assert!(validate_filter("site/#").is_ok());
/// assert!(validate_filter("site/#/readings").is_err()); // `#` only last
/// assert!(validate_filter("site/a+").is_err()); // wildcards only as whole levels
/// ```
pub fn validate_filter(filter: &str) -> Result<(), String> {
    if filter.is_empty() {
        return Err("an MQTT topic filter must not be empty".into());
    }
    if filter.contains('\0') {
        return Err(format!("MQTT topic filter {filter:?} contains NUL"));
    }
    let parts: Vec<&str> = filter.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let wildcard = part.contains('+') || part.contains('#');
        if wildcard && part.len() != 1 {
            return Err(format!("MQTT topic filter {filter:?}: a wildcard must be a whole level"));
        }
        if *part == "#" && i + 1 != parts.len() {
            return Err(format!("MQTT topic filter {filter:?}: '#' must be the last level"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_examples() {
        // MQTT 5, 4.7.1.2 and 4.7.1.3.
        assert!(matches("sport/tennis/player1/#", "sport/tennis/player1"));
        assert!(matches("sport/tennis/player1/#", "sport/tennis/player1/ranking"));
        assert!(matches("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon"));
        assert!(matches("sport/#", "sport"));
        assert!(matches("sport/tennis/+", "sport/tennis/player1"));
        assert!(!matches("sport/tennis/+", "sport/tennis/player1/ranking"));
        assert!(matches("sport/+", "sport/"));
        assert!(!matches("sport/+", "sport"));
        assert!(matches("+/+", "/finance"));
        assert!(matches("/+", "/finance"));
        assert!(!matches("+", "/finance"));
        assert!(matches("#", "a/b/c"));
        // 4.7.2: `$` topics.
        assert!(!matches("#", "$SYS/monitor/Clients"));
        assert!(!matches("+/monitor/Clients", "$SYS/monitor/Clients"));
        assert!(matches("$SYS/#", "$SYS/monitor/Clients"));
        assert!(matches("$SYS/monitor/+", "$SYS/monitor/Clients"));
    }

    #[test]
    fn literal_filters_match_only_themselves() {
        assert!(matches("a/b", "a/b"));
        assert!(!matches("a/b", "a/b/c"));
        assert!(!matches("a/b/c", "a/b"));
        assert!(!matches("a/b", "a/bc"));
    }

    #[test]
    fn filter_validation() {
        for good in ["a", "a/+/c", "#", "a/#", "+", "+/+", "/a"] {
            assert!(validate_filter(good).is_ok(), "{good}");
        }
        for bad in ["", "a/#/c", "a+/b", "a/b#", "a\0b"] {
            assert!(validate_filter(bad).is_err(), "{bad:?}");
        }
    }
}
