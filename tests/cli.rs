//! The command line: usage errors, `decode`, `get`, and configuration through environment.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    for (args, says) in [
        (
            &["serve", "--generator-id", "64"][..],
            "--generator-id 64 is out of range",
        ),
        (
            &["serve", "--cluster-id", "99"][..],
            "cluster 99 is out of range",
        ),
        (&["serve", "--lease-horizon", "soon"][..], "examples: 500ms"),
        (&["serve", "--layout", "uuid"][..], "unknown layout"),
        (&["serve", "--bogus"][..], "unexpected argument"),
        (&["decode", "zz"][..], "cannot decode"),
        (&["decode", "--format", "oct", "1"][..], "unknown text form"),
        (&["frobnicate"][..], "unrecognized subcommand"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn decode_prints_fields_and_json() {
    let (code, out, _) = run(&["decode", "--json", "cb54ecf284000000"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["timestamp_ms"], 143062936275u64);
    for k in ["timestamp_ms", "sequence", "generator", "cluster", "time"] {
        assert!(v.get(k).is_some(), "{k} missing: {out}");
    }
    let (code, out, _) = run(&["decode", "--format", "i64", "-1"]);
    assert_eq!(code, 2, "reserved bits set in all-ones: {out}");
    // A negative i64 needs no `--`.
    let (code, out, err) = run(&["decode", "-3795148059625652224"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("timestamp_ms: 143062936275"), "{out}");
    let out = std::process::Command::new(BIN)
        .args(["decode", "cb54ecf284000000"])
        .env("IDCAR_JSON", "1")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with('{'),
        "IDCAR_JSON=1 gives JSON"
    );
    // A decimal integer fits several layouts: without --layout, a clear refusal.
    let (code, _, err) = run(&["decode", "624"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("could be an ID of") && err.contains("lable64") && err.contains("si53"),
        "{err}"
    );
    let (code, out, _) = run(&["decode", "--layout", "lable64", "624"]);
    assert_eq!(code, 0);
    assert!(out.contains("generator: 39"), "{out}");
    // The other layouts' text shapes are told apart without --layout.
    for (text, layout) in [
        ("6kvrqg243a22o22e", "sno80"),
        ("5D5EAC793E61F-1BFC71B112D-0000000B", "muid128"),
        ("5D5EAC793E61F", "muid128"),
        ("34LWCJYACb", "ugd60"),
    ] {
        let (code, out, err) = run(&["decode", "--json", text]);
        assert_eq!(code, 0, "{text}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["layout"], layout, "{text}");
    }
    // Sixteen characters of the sno alphabet are also decimal digits here: ambiguous.
    let (code, _, err) = run(&["decode", "2222222222222222"]);
    assert_eq!(code, 2);
    assert!(err.contains("sno80") && err.contains("si53"), "{err}");
    let (code, _, err) = run(&["decode", "not an id"]);
    assert_eq!(code, 2);
    assert!(err.contains("not an ID of any layout"), "{err}");
}

#[tokio::test]
async fn get_and_environment_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let mut child = std::process::Command::new(BIN)
        .arg("serve")
        .env("IDCAR_SOCKET", dir.path().join("e.sock"))
        .env("IDCAR_STATE_FILE", dir.path().join("e.state"))
        .env("IDCAR_ADMIN_ADDR", &admin)
        .env("IDCAR_GENERATOR_ID", "33")
        .env("IDCAR_CLUSTER_ID", "2")
        .env("IDCAR_LOG_FORMAT", "json")
        .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
        .spawn()
        .unwrap();
    let sock = dir.path().join("e.sock");
    let mut out = String::new();
    for _ in 0..500 {
        let (code, o, _) = run(&["get", "--socket", sock.to_str().unwrap(), "-n", "3"]);
        if code == 0 {
            out = o;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(out.lines().count(), 3, "{out}");
    // The served layout named: a lable64 hex ID made only of digits also reads as a decimal
    // integer of other layouts, and the guess would rightly refuse it.
    let (code, o, _) = run(&[
        "decode",
        "--layout",
        "lable64",
        "--json",
        out.lines().next().unwrap(),
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(
        (v["generator"].as_u64(), v["cluster"].as_u64()),
        (Some(33), Some(2))
    );
    let (code, _, err) = run(&["get", "--socket", sock.to_str().unwrap(), "-n", "0"]);
    assert_eq!(code, 2, "{err}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let st = child.wait().unwrap();
    assert!(st.success());
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let first = log.lines().next().unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(first).is_ok(),
        "JSON logs: {first}"
    );
    let (code, _, err) = run(&["get", "--socket", sock.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot connect"), "{err}");
}
