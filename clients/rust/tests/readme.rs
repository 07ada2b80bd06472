//! The README's example, taken from README.md as it stands, built as a program of its own
//! (depending on this crate by path) and run against a real server.

mod common;

use common::Server;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first ```rust block of README.md.
fn readme_example() -> String {
    let readme = include_str!("../README.md");
    let start = readme
        .lines()
        .position(|l| l.starts_with("```rust"))
        .expect("a ```rust block in README.md");
    readme
        .lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with("```"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn the_readme_starts_with_the_install_line_then_the_example() {
    let readme = include_str!("../README.md");
    let blocks: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("```") && l.len() > 3)
        .take(2)
        .collect();
    assert_eq!(
        blocks,
        ["```sh", "```rust,no_run"],
        "the first two fenced blocks"
    );
    let install = readme.split("```sh\n").nth(1).unwrap_or_default();
    assert!(install.starts_with("cargo add idcar-client"), "{install}");
    // Nothing but the title and one paragraph before the install line.
    let before = readme.split("```sh").next().unwrap_or_default();
    assert!(
        before.lines().filter(|l| l.starts_with('#')).count() == 1,
        "{before}"
    );
}

#[test]
fn the_readme_example_runs_and_prints_an_id() {
    let code = readme_example();
    assert!(code.lines().count() <= 8, "keep it short:\n{code}");
    let s = Server::start(&["--layout", "lable64"]);
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let project = tmp.join("readme-example");
    let _ = std::fs::remove_dir_all(&project);
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"readme-example\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nidcar-client = {{ path = {:?} }}\n\n[workspace]\n",
            env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    std::fs::write(project.join("src/main.rs"), &code).unwrap();
    let mut child = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", tmp.join("readme-example-target"))
        .env("IDCAR_SOCKET", &s.socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the README example did not finish in 300 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{code}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().next().unwrap_or_default();
    // An ID of the server's layout, issued just now.
    let d = idcar_client::Description::for_layout("lable64").unwrap();
    let f = d.parse_id(line).unwrap().decode().unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let age = now_ms - f.int("timestamp_ms").unwrap();
    assert!((0..600_000).contains(&age), "{line}: issued {age} ms ago?");
}
