//! Why a command failed: each is printed as `flechtctl: error: <text>` and exits 1, with the
//! words Python's flechtctl prints for the same failure.

use flechtwerk::secrets::{KeyringError, SecretError};

/// A refused command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The keyring: its file, its checks, a key it lacks, a wrong password.
    #[error(transparent)]
    Keyring(#[from] KeyringError),
    /// A keyring edit the command itself refuses (an entry that is not there, the primary
    /// removed): Python's `KeyringError` raised by the command line.
    #[error("{0}")]
    KeyringCommand(String),
    /// A token: its format, its decryption, its signature, its scope.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// A file or standard input could not be read or written (Python's `OSError` text:
    /// `[Errno N] <strerror>: '<path>'`).
    #[error("{0}")]
    Os(String),
    /// Bad input that is no keyring's or token's fault (Python's `ValueError`): a value that is
    /// not JSON, a file that exists already, a password that is missing.
    #[error("{0}")]
    Value(String),
}

pub(crate) type Result<T> = std::result::Result<T, CliError>;
