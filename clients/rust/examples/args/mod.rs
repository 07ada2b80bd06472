//! The flags both examples share: `--socket S`, `--retry-deadline SECONDS` (a decimal number)
//! and one whole number per other flag (all optional).

use std::collections::HashMap;
use std::path::PathBuf;

pub struct Args {
    pub socket: Option<PathBuf>,
    pub retry_deadline: Option<std::time::Duration>,
    numbers: HashMap<&'static str, u64>,
}

impl Args {
    /// Parses `--socket S` and `--NAME N` for each name in `numbers`; anything else is an error.
    pub fn parse(numbers: &[&'static str]) -> Result<Args, String> {
        let mut a = Args {
            socket: None,
            retry_deadline: None,
            numbers: HashMap::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.strip_prefix("--") {
                Some("socket") => a.socket = Some(value.into()),
                Some("retry-deadline") => {
                    let d = value
                        .parse::<f64>()
                        .ok()
                        .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
                        .ok_or_else(|| {
                            format!("--retry-deadline {value:?} is not a number of seconds")
                        })?;
                    a.retry_deadline = Some(d);
                }
                Some(name) if numbers.contains(&name) => {
                    let n = value
                        .parse()
                        .map_err(|_| format!("--{name} {value:?} is not a whole number"))?;
                    let name = numbers
                        .iter()
                        .find(|n| **n == name)
                        .copied()
                        .unwrap_or_default();
                    a.numbers.insert(name, n);
                }
                _ => return Err(format!("unknown flag {flag:?}")),
            }
        }
        Ok(a)
    }

    pub fn number(&self, name: &str) -> Option<u64> {
        self.numbers.get(name).copied()
    }
}
