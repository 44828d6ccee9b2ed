//! `flechtctl`: keyring files and `flenc:` / `flsig:` secret tokens from the command line.
//!
//! The same commands, flags, outputs, exit codes (0 done, 1 refused, 2 a usage error) and files
//! as Python's `flechtctl` 0.17, so an operator may use either on the same keyring file. The
//! cryptography and the file formats are the library's (`flechtwerk::secrets`); this crate only
//! reads arguments, files, standard input and passwords, and prints. Like Python's, it reads no
//! environment variable: every crypto command names its keyring with `-k/--keyring`.

mod commands;
mod error;
mod files;
mod pyjson;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Keyrings and flenc:/flsig: secret tokens for Flechtwerk. Reads no environment variables: every
/// crypto command needs -k/--keyring.
#[derive(Debug, Parser)]
#[command(name = "flechtctl", version, infer_long_args = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// decrypt a flenc token and print its value
    Decrypt {
        #[command(flatten)]
        keyring: KeyringOption,
        /// the domain-separation scope
        #[arg(long, value_name = "SCOPE", default_value = "", allow_negative_numbers = true)]
        scope: String,
        /// print the value raw (it must be a JSON string)
        #[arg(long)]
        string: bool,
        /// the token; omitted or - reads stdin
        #[arg(value_name = "TOKEN")]
        token: Option<String>,
    },
    /// encrypt a value and print the flenc token
    Encrypt {
        #[command(flatten)]
        keyring: KeyringOption,
        /// the domain-separation scope
        #[arg(long, value_name = "SCOPE", default_value = "", allow_negative_numbers = true)]
        scope: String,
        /// take VALUE as a raw string, not as JSON
        #[arg(long)]
        string: bool,
        /// the value; omitted or - reads stdin
        #[arg(value_name = "VALUE", allow_negative_numbers = true)]
        value: Option<String>,
    },
    /// show the unauthenticated header of a flenc or flsig token (no keyring)
    Inspect {
        /// the token; omitted or - reads stdin
        #[arg(value_name = "TOKEN")]
        token: Option<String>,
    },
    /// create and edit keyring files
    Keyring {
        #[command(subcommand)]
        command: KeyringCommand,
    },
    /// re-seal a flenc token under the scope's current sealing key
    Reencrypt {
        #[command(flatten)]
        keyring: KeyringOption,
        /// the domain-separation scope
        #[arg(long, value_name = "SCOPE", default_value = "", allow_negative_numbers = true)]
        scope: String,
        /// the token; omitted or - reads stdin
        #[arg(value_name = "TOKEN")]
        token: Option<String>,
    },
    /// sign a value and print the flsig token
    Sign {
        #[command(flatten)]
        keyring: KeyringOption,
        /// the domain-separation scope
        #[arg(long, value_name = "SCOPE", required = true, allow_negative_numbers = true)]
        scope: String,
        /// take VALUE as a raw string, not as JSON
        #[arg(long)]
        string: bool,
        /// the value; omitted or - reads stdin
        #[arg(value_name = "VALUE", allow_negative_numbers = true)]
        value: Option<String>,
    },
    /// verify a flsig token and print its value
    Verify {
        #[command(flatten)]
        keyring: KeyringOption,
        /// the domain-separation scope
        #[arg(long, value_name = "SCOPE", required = true, allow_negative_numbers = true)]
        scope: String,
        /// print the value raw (it must be a JSON string)
        #[arg(long)]
        string: bool,
        /// the token; omitted or - reads stdin
        #[arg(value_name = "TOKEN")]
        token: Option<String>,
    },
}

/// `-k/--keyring PATH` and `--password-file PATH` of the crypto commands.
#[derive(Debug, Args)]
struct KeyringOption {
    /// the keyring file
    #[arg(short = 'k', long = "keyring", value_name = "PATH", required = true)]
    path: String,
    #[command(flatten)]
    password: PasswordOption,
}

/// `--password-file PATH`: how a password-protected keyring is opened (else a prompt on a
/// terminal).
#[derive(Debug, Args, Clone)]
struct PasswordOption {
    /// file holding the keyring password
    #[arg(long = "password-file", value_name = "PATH")]
    password_file: Option<String>,
}

/// `--primary`, `--primary-for SCOPE`, `--signing-for SCOPE`: the roles `add` and `import` give
/// the new entry.
#[derive(Debug, Args)]
struct Roles {
    /// make the entry the primary sealing key
    #[arg(long)]
    primary: bool,
    /// make the entry the sealing key for SCOPE (repeatable)
    #[arg(long = "primary-for", value_name = "SCOPE")]
    primary_for: Vec<String>,
    /// make the entry the signing key for SCOPE (repeatable)
    #[arg(long = "signing-for", value_name = "SCOPE")]
    signing_for: Vec<String>,
}

/// The kinds of key `keyring add` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "lower")]
enum KeyType {
    Oct,
    X25519,
    Ed25519,
}

/// The kinds of key `keyring new` makes: a sealing key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "lower")]
enum SealingType {
    Oct,
    X25519,
}

#[derive(Debug, Subcommand)]
enum KeyringCommand {
    /// add a freshly generated key to a keyring
    Add {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        /// the new key's id
        #[arg(long, required = true)]
        kid: String,
        /// the kind of key (default: oct)
        #[arg(long = "type", value_enum, default_value = "oct")]
        kind: KeyType,
        /// bind the key to SCOPE (repeatable)
        #[arg(long, value_name = "SCOPE")]
        scope: Vec<String>,
        #[command(flatten)]
        roles: Roles,
    },
    /// print the public half of one entry as a JWK (the keyring is left alone)
    Export {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        /// the entry to export
        #[arg(value_name = "KID")]
        kid: String,
        /// write the JWK to OUT instead of stdout
        #[arg(short, long, value_name = "OUT")]
        output: Option<String>,
    },
    /// add the single JWK in JWKFILE (typically an export) as a new entry
    Import {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        /// a file holding one JWK
        #[arg(value_name = "JWKFILE")]
        jwkfile: String,
        /// when creating the keyring, write it password-protected
        #[arg(long)]
        encrypt: bool,
        #[command(flatten)]
        roles: Roles,
    },
    /// create a keyring holding one freshly generated sealing key
    New {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        /// the key's id
        #[arg(long, required = true)]
        kid: String,
        /// the kind of key (default: oct)
        #[arg(long = "type", value_enum, default_value = "oct")]
        kind: SealingType,
        /// bind the key to SCOPE (repeatable)
        #[arg(long, value_name = "SCOPE")]
        scope: Vec<String>,
        /// overwrite an existing file
        #[arg(long)]
        force: bool,
        /// write the keyring password-protected
        #[arg(long)]
        encrypt: bool,
    },
    /// set the primary sealing key, or the sealing key for one scope
    Primary {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        #[arg(value_name = "KID")]
        kid: String,
        /// set the sealing key for SCOPE instead of the primary
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
    },
    /// rewrite a plain keyring file in place as password-protected
    Protect {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
    },
    /// drop an entry with its scope binding and roles
    Remove {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        #[arg(value_name = "KID")]
        kid: String,
    },
    /// list the entries (never any key material)
    Show {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
    },
    /// set the signing key for one scope
    Signing {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        #[arg(value_name = "KID")]
        kid: String,
        #[arg(long, value_name = "SCOPE", required = true)]
        scope: String,
    },
    /// write a plain copy of a protected keyring (it stays protected)
    Unprotect {
        /// the keyring file
        #[arg(value_name = "KEYRING")]
        keyring: String,
        #[command(flatten)]
        password: PasswordOption,
        /// where to write the plain copy
        #[arg(short, long, value_name = "OUT", required = true)]
        output: String,
        /// overwrite OUT if it exists
        #[arg(long)]
        force: bool,
    },
}

fn main() {
    // Usage errors exit 2 (clap's, as argparse's); --help and --version exit 0.
    let cli = Cli::parse();
    let code = match commands::run(cli.command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("flechtctl: error: {e}");
            1
        }
    };
    std::process::exit(code);
}
