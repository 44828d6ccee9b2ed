//! Files, standard input and passwords, read and written as Python's flechtctl does: text files
//! as UTF-8 with universal newlines, keyring files written atomically with mode 0600, a
//! password from `--password-file` or a prompt on the terminal.

use std::fs;
use std::io::{self, IsTerminal as _, Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::error::{CliError, Result};

/// Python's `OSError` text for a failure on `path`: `[Errno N] <strerror>: '<path>'`.
pub(crate) fn os_error(e: &io::Error, path: &str) -> CliError {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => {
            let strerror = text.strip_suffix(&format!(" (os error {code})")).unwrap_or(&text);
            CliError::Os(format!("[Errno {code}] {strerror}: {}", repr(path)))
        }
        None => CliError::Os(format!("{text}: {}", repr(path))),
    }
}

/// Python's `repr` of a string: single quotes unless the text holds one and no double quote.
pub(crate) fn repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            // Python escapes every non-printable character; below U+0100 those are the C0 and
            // C1 controls, DEL, NBSP and the soft hyphen (above, this prints them as they are).
            c if (c as u32) < 0x20 || (0x7f..=0xa0).contains(&(c as u32)) || c == '\u{ad}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// How Python prints `Path(text)`: repeated and trailing slashes dropped, `.` components
/// dropped (a lone `.` stays), a leading `//` kept.
pub(crate) fn display_path(text: &str) -> String {
    let root = if text.starts_with("//") && !text.starts_with("///") {
        "//"
    } else if text.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let joined = format!("{root}{}", parts.join("/"));
    if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    }
}

/// Universal newlines: `\r\n` and a lone `\r` read as `\n` (Python's text mode).
fn universal_newlines(text: Zeroizing<String>) -> Zeroizing<String> {
    if !text.contains('\r') {
        return text;
    }
    let mut out = Zeroizing::new(String::with_capacity(text.len()));
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' {
            if chars.peek() == Some(&'\n') {
                chars.next();
            }
            out.push('\n');
        } else {
            out.push(c);
        }
    }
    out
}

/// The bytes as UTF-8 text (Python's strict decoding); the bytes are wiped either way.
fn utf8(bytes: Vec<u8>) -> Result<Zeroizing<String>> {
    String::from_utf8(bytes).map(Zeroizing::new).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = Zeroizing::new(e.into_bytes());
        let byte = bytes[at];
        CliError::Value(format!("'utf-8' codec can't decode byte 0x{byte:02x} in position {at}: invalid utf-8"))
    })
}

/// `Path(path).read_text(encoding="utf-8")`.
pub(crate) fn read_text(path: &str) -> Result<Zeroizing<String>> {
    let bytes = fs::read(path).map_err(|e| os_error(&e, path))?;
    Ok(universal_newlines(utf8(bytes)?))
}

/// The operand itself, or standard input (one trailing newline stripped) when it is omitted or
/// `-`.
pub(crate) fn read_operand(operand: Option<&str>) -> Result<Zeroizing<String>> {
    match operand {
        Some(text) if text != "-" => Ok(Zeroizing::new(text.to_owned())),
        _ => {
            let mut bytes = Vec::new();
            io::stdin().read_to_end(&mut bytes).map_err(|e| CliError::Os(e.to_string()))?;
            let mut text = utf8(bytes)?;
            if text.ends_with('\n') {
                text.pop();
            }
            Ok(text)
        }
    }
}

/// Writes `text` to `path` atomically with mode 0600: a temporary file beside it
/// (`.<name>.<random>.tmp`), then a rename over `path`.
pub(crate) fn write_private(path: &str, text: &str) -> Result<()> {
    let target = Path::new(path);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (temporary, mut file) = loop {
        let candidate = parent.join(format!(".{name}.{}.tmp", random_suffix()));
        match fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&candidate) {
            Ok(file) => break (candidate, file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(os_error(&e, &candidate.to_string_lossy())),
        }
    };
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::set_permissions(&temporary, std::os::unix::fs::PermissionsExt::from_mode(0o600)))
        .and_then(|()| fs::rename(&temporary, target));
    if let Err(e) = written {
        let _ = fs::remove_file(&temporary);
        return Err(os_error(&e, path));
    }
    Ok(())
}

/// `Path(path).write_text(text)`: an ordinary file (the process's umask decides its mode).
pub(crate) fn write_text(path: &str, text: &str) -> Result<()> {
    fs::write(path, text).map_err(|e| os_error(&e, path))
}

/// Eight characters for a temporary file's name, from the standard library's per-process
/// random hash keys.
fn random_suffix() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    let mut n = hasher.finish();
    const ALPHABET: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz0123456789_";
    (0..8)
        .map(|_| {
            let c = ALPHABET[(n % 37) as usize] as char;
            n /= 37;
            c
        })
        .collect()
}

fn read_password_file(path: &str) -> Result<Zeroizing<String>> {
    let mut text = read_text(path)?;
    if text.ends_with('\n') {
        text.pop();
    }
    Ok(text)
}

/// The password of an existing protected keyring: `--password-file`, else a prompt when
/// standard input is a terminal.
pub(crate) fn existing_password(password_file: Option<&str>) -> Result<Zeroizing<String>> {
    if let Some(path) = password_file.filter(|p| !p.is_empty()) {
        return read_password_file(path);
    }
    if io::stdin().is_terminal() {
        return prompt("Keyring password: ");
    }
    Err(CliError::Value("this keyring is password-protected — pass --password-file".to_owned()))
}

/// The password for a keyring about to be protected: `--password-file`, else asked twice on the
/// terminal.
pub(crate) fn new_password(password_file: Option<&str>) -> Result<Zeroizing<String>> {
    if let Some(path) = password_file.filter(|p| !p.is_empty()) {
        return read_password_file(path);
    }
    if io::stdin().is_terminal() {
        let password = prompt("Keyring password: ")?;
        if *prompt("Repeat the password: ")? != *password {
            return Err(CliError::Value("the passwords do not match".to_owned()));
        }
        return Ok(password);
    }
    Err(CliError::Value("a password-protected keyring needs a password — pass --password-file".to_owned()))
}

/// Asks on the controlling terminal with its echo off, as Python's `getpass` does; the line
/// read, without its newline.
fn prompt(question: &str) -> Result<Zeroizing<String>> {
    use std::os::fd::AsRawFd as _;
    let mut tty =
        fs::OpenOptions::new().read(true).write(true).open("/dev/tty").map_err(|e| os_error(&e, "/dev/tty"))?;
    let fd = tty.as_raw_fd();
    // SAFETY: `termios` is plain data; tcgetattr fills it for an open descriptor.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is the open terminal above, `saved` a valid termios to fill.
    let have_termios = unsafe { libc::tcgetattr(fd, &mut saved) } == 0;
    if have_termios {
        let mut quiet = saved;
        quiet.c_lflag &= !libc::ECHO;
        // SAFETY: as above; `quiet` is the terminal's own settings without echo.
        unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &quiet) };
    }
    let read = (|| -> io::Result<Zeroizing<String>> {
        tty.write_all(question.as_bytes())?;
        tty.flush()?;
        let mut line = Zeroizing::new(Vec::new());
        let mut byte = [0u8; 1];
        while tty.read(&mut byte)? == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        Ok(Zeroizing::new(String::from_utf8_lossy(&line).into_owned()))
    })();
    if have_termios {
        // SAFETY: restores the settings read above on the same descriptor.
        unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &saved) };
    }
    let _ = tty.write_all(b"\n");
    read.map_err(|e| os_error(&e, "/dev/tty"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_as_python_prints_them() {
        assert_eq!(display_path("./a//b/"), "a/b");
        assert_eq!(display_path("k.json"), "k.json");
        assert_eq!(display_path("/tmp/./x"), "/tmp/x");
        assert_eq!(display_path("."), ".");
        assert_eq!(display_path("//x"), "//x");
    }

    #[test]
    fn text_files_read_with_universal_newlines() {
        assert_eq!(universal_newlines(Zeroizing::new("a\r\nb\rc\n\r".to_owned())).as_str(), "a\nb\nc\n\n");
        assert_eq!(universal_newlines(Zeroizing::new("plain\n".to_owned())).as_str(), "plain\n");
    }

    #[test]
    fn repr_as_python() {
        assert_eq!(repr("a"), "'a'");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("a\nb\\"), "'a\\nb\\\\'");
        // C1 controls, NBSP and the soft hyphen escape too, as in Python; Latin-1 letters do not.
        assert_eq!(repr("a\u{85}b\u{7f}"), "'a\\x85b\\x7f'");
        assert_eq!(repr("\u{a0}\u{ad}\u{e9}"), "'\\xa0\\xad\u{e9}'");
    }
}
