//! What the campaign needs before it touches anything: root, `ip`, `nft`, faketime, and an
//! `idcar` built with the testing aids when a bug is to be planted.

use crate::procs;
use anyhow::{bail, Result};
use idcar_lease::planted::PlantedBug;
use std::path::PathBuf;

/// Checks what the campaign needs before touching anything.
pub(crate) fn preflight(idcar: &std::path::Path, planted: PlantedBug) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the campaign needs root (network namespaces and nftables)");
    }
    for (tool, pkg) in [("ip", "iproute2"), ("nft", "nftables")] {
        if which(tool).is_none() {
            bail!("{tool} not found: install Debian's {pkg} (tests/ensure-deps.sh does)");
        }
    }
    if !std::path::Path::new(procs::FAKETIME).exists() {
        bail!("{} missing: install Debian's faketime", procs::FAKETIME);
    }
    let build = "cargo build --features fault-injection --bins";
    if !idcar.exists() {
        bail!(
            "{} not found: build it with `{build}` or pass --idcar",
            idcar.display()
        );
    }
    if planted != PlantedBug::None {
        let ok = std::process::Command::new(idcar)
            .args(["serve", "--plant-bug", "none", "--help"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            bail!(
                "{} cannot plant bugs (built without the fault-injection feature): `{build}`",
                idcar.display()
            );
        }
    }
    Ok(())
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| PathBuf::from(d).join(tool))
        .find(|p| p.exists())
}
