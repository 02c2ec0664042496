//! Command-line configuration.
//!
//! Options are given redis-server style, `--name value`; `--help` lists them.

use std::net::IpAddr;

use goblin_protocol::Limits;

/// The server's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on.
    pub bind: IpAddr,
    /// TCP port (0: any free port; the bound port is printed).
    pub port: u16,
    /// Shard threads; 0 means one per core this process may use.
    pub threads: usize,
    /// Protocol limits.
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6379,
            threads: 0,
            limits: Limits::default(),
        }
    }
}

/// The usage text.
pub const USAGE: &str = "\
goblin-server: a Redis-protocol in-memory server, shared-nothing and thread-per-core.

Usage: goblin-server [options]

Options:
  --bind ADDR               address to listen on (default 127.0.0.1)
  --port PORT               TCP port (default 6379; 0 picks a free port)
  --threads N               shard threads, one pinned per core, at most 1024 (default:
                            the cores this process may use)
  --proto-max-bulk-len N    largest bulk argument in bytes (default 536870912)
  -h, --help                print this help
  -v, --version             print the version
";

/// What the command line asks for.
#[derive(Debug)]
pub enum Cli {
    /// Run with this configuration.
    Run(Config),
    /// Print the help.
    Help,
    /// Print the version.
    Version,
}

/// The most shard threads: far more than any machine's cores, and far fewer than the 16384
/// hash slots, so that every shard owns slots.
pub const MAX_THREADS: usize = 1024;

fn parse_num<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("invalid value for {name}: '{value}'"))
}

/// Parses the arguments (without the program name).
///
/// # Errors
/// A message naming the bad option or value.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut config = Config::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let name = arg.as_str();
        match name {
            "-h" | "--help" => return Ok(Cli::Help),
            "-v" | "--version" => return Ok(Cli::Version),
            _ => {}
        }
        let value = args
            .next()
            .ok_or_else(|| format!("missing value for {name}"))?;
        match name {
            "--bind" => config.bind = parse_num(name, &value)?,
            "--port" => config.port = parse_num(name, &value)?,
            "--threads" => {
                config.threads = parse_num(name, &value)?;
                if config.threads > MAX_THREADS {
                    return Err(format!("--threads must be at most {MAX_THREADS}"));
                }
            }
            "--proto-max-bulk-len" => {
                config.limits.max_bulk_len = parse_num(name, &value)?;
                if config.limits.max_bulk_len < 1024 {
                    return Err("--proto-max-bulk-len must be at least 1024".into());
                }
            }
            _ => return Err(format!("unknown option {name} (see --help)")),
        }
    }
    Ok(Cli::Run(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_options() {
        let Ok(Cli::Run(c)) = parse(args("--port 7000 --bind 0.0.0.0 --threads 4")) else {
            panic!("expected a config");
        };
        assert_eq!((c.port, c.threads), (7000, 4));
        assert_eq!(c.bind, IpAddr::from([0, 0, 0, 0]));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse(args("--port")).is_err());
        assert!(parse(args("--port x")).is_err());
        assert!(parse(args("--nope 1")).is_err());
        assert!(parse(args("--threads 1025")).is_err());
        assert!(parse(args("--threads 99999999999999")).is_err());
        assert!(matches!(parse(args("--help")), Ok(Cli::Help)));
    }
}
