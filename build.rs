//! Records the commit idcar is built from, for `idcar --version` and `idcar_build_info`:
//! `IDCAR_COMMIT` if set (an image built without the repository passes it as a build
//! argument), else `git rev-parse --short=12 HEAD` with `-dirty` when the tree has changes,
//! else `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=IDCAR_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    let commit = std::env::var("IDCAR_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(from_git)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=IDCAR_COMMIT={}", commit.trim());
}

fn from_git() -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short=12", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}
