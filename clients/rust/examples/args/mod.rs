//! The flags both examples share: `--socket S` and one number per other flag (all optional).

use std::collections::HashMap;
use std::path::PathBuf;

pub struct Args {
    pub socket: Option<PathBuf>,
    numbers: HashMap<&'static str, u64>,
}

impl Args {
    /// Parses `--socket S` and `--NAME N` for each name in `numbers`; anything else is an error.
    pub fn parse(numbers: &[&'static str]) -> Result<Args, String> {
        let mut a = Args {
            socket: None,
            numbers: HashMap::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.strip_prefix("--") {
                Some("socket") => a.socket = Some(value.into()),
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
