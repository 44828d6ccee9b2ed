//! Helpers of the metrics tests: reading an exposition, a plain HTTP GET.

#![allow(dead_code)] // each test binary uses a subset

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One family of an exposition: its type, help, and sample lines (`series value`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Family {
    pub kind: String,
    pub help: String,
    pub samples: BTreeSet<String>,
}

/// An exposition in the text format, by family name (the `# TYPE` line's name; a sample line
/// belongs to the last family declared).
pub fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_owned()).or_default().help = help.to_owned();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            families.entry(name.to_owned()).or_default().kind = kind.to_owned();
            current = name.to_owned();
        } else if !line.is_empty() && !line.starts_with('#') {
            assert!(!current.is_empty(), "a sample before any TYPE line: {line}");
            families.get_mut(&current).unwrap().samples.insert(line.to_owned());
        }
    }
    families
}

/// Every sample of an exposition: series (name and labels, as written) → value.
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("series value");
            (series.to_owned(), value.parse::<f64>().unwrap_or_else(|_| panic!("a value in {l}")))
        })
        .collect()
}

/// The label names of a sample line, in the order written.
pub fn label_names(sample: &str) -> Vec<String> {
    let Some((_, rest)) = sample.split_once('{') else {
        return Vec::new();
    };
    let labels = &rest[..rest.rfind('}').unwrap()];
    let mut names = Vec::new();
    let mut rest = labels;
    while let Some((name, after)) = rest.split_once("=\"") {
        names.push(name.trim_start_matches(',').to_owned());
        // Skip the value: up to the first unescaped quote.
        let mut escaped = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                let quote = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                quote
            })
            .unwrap()
            .0;
        rest = &after[end + 1..];
    }
    names
}

/// A series as an exposition writes it: labels sorted by name.
pub fn series(name: &str, labels: &[(&str, &str)]) -> String {
    let mut labels = labels.to_vec();
    labels.sort();
    if labels.is_empty() {
        return name.to_owned();
    }
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// A plain HTTP/1.1 GET (blocking): status line, headers (lower-cased names), body.
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(String, BTreeMap<String, String>, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_owned();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((status, headers, body.to_owned()))
}
