//! Flag checks: defaults valid, bad values named by their flag.

use super::*;
use crate::cli::{Cli, Command};
use clap::Parser;

fn parse(extra: &[&str]) -> Result<ServeConfig, UsageError> {
    let mut argv = vec!["idcar", "serve"];
    argv.extend_from_slice(extra);
    let Command::Serve(a) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    ServeConfig::from_args(
        &a,
        crate::clock::Clock::now_unix_ns(&crate::clock::SystemClock),
    )
}

#[test]
fn defaults_are_valid() {
    let c = parse(&[]).unwrap();
    assert_eq!(c.socket_mode, 0o660);
    assert_eq!(c.mark_key(0), "lable64/0/0");
    assert!(matches!(c.lease, LeaseSource::Static { slot: 0, .. }));
    let z = parse(&[
        "--zk",
        "127.0.0.1:2181",
        "--generator-id",
        "5",
        "--pool-size",
        "8",
    ])
    .unwrap();
    let LeaseSource::Pool(z) = z.lease else {
        panic!()
    };
    let crate::lease::StoreSpec::Zk { root, .. } = &z.store else {
        panic!("ZooKeeper")
    };
    assert_eq!(
        (z.pool_size, z.prefer, root.as_str()),
        (8, Some(5), "/idcar")
    );
    assert!(c.admin_addr.is_some());
}

#[test]
fn bad_values_say_which_flag() {
    for (args, flag) in [
        (&["--generator-id", "64"][..], "--generator-id"),
        (&["--cluster-id", "16"][..], "--cluster-id"),
        (&["--layout", "nope"][..], "--layout"),
        (&["--socket-mode", "999"][..], "--socket-mode"),
        (&["--admin-addr", "localhost"][..], "--admin-addr"),
        (
            &["--renew-interval", "2s", "--lease-horizon", "3s"][..],
            "--renew-interval",
        ),
        (&["--max-batch", "0"][..], "--max-batch"),
        (&["--max-batch", "400000"][..], "cannot be served within"),
        (&["--max-connections", "100000000"][..], "--max-connections"),
        (&["--renew-interval", "9999999h"][..], "at most 1h"),
        (&["--request-timeout", "9999999h"][..], "at most 1h"),
        (
            &["--lease-horizon", "20s", "--max-clock-wait", "10s"][..],
            "--max-clock-wait",
        ),
        (&["--threads", "0"][..], "--threads"),
        (
            &["--admin-max-connections", "0"][..],
            "--admin-max-connections",
        ),
        (&["--admin-timeout", "0s"][..], "--admin-timeout"),
    ] {
        let e = parse(args).unwrap_err().to_string();
        assert!(e.contains(flag), "{args:?}: {e}");
    }
    assert!(parse(&["--admin-addr", "none"])
        .unwrap()
        .admin_addr
        .is_none());
}

#[test]
fn the_default_horizon_depends_on_the_mode() {
    let horizon = |extra: &[&str]| parse(extra).unwrap().timings.horizon;
    let zk = ["--zk", "127.0.0.1:2181"];
    assert_eq!(horizon(&[]), Duration::from_secs(3));
    assert_eq!(
        horizon(&zk),
        Duration::from_secs(5),
        "the default 6 s session"
    );
    let with = |session: &'static str| [zk[0], zk[1], "--zk-session-timeout", session];
    assert_eq!(horizon(&with("1s")), Duration::from_secs(3));
    assert_eq!(horizon(&with("4500ms")), Duration::from_millis(3500));
    assert_eq!(horizon(&with("60s")), Duration::from_secs(5));
    let given = [zk[0], zk[1], "--lease-horizon", "2s"];
    assert_eq!(horizon(&given), Duration::from_secs(2));
    assert_eq!(horizon(&["--lease-horizon", "8s"]), Duration::from_secs(8));
    let waits = [zk[0], zk[1], "--max-clock-wait", "4s"];
    assert_eq!(
        horizon(&waits),
        Duration::from_secs(4),
        "still a valid configuration"
    );
    // etcd: the same rule from the etcd lease's TTL.
    let etcd = ["--etcd", "127.0.0.1:2379"];
    assert_eq!(
        horizon(&etcd),
        Duration::from_secs(5),
        "the default 6 s TTL"
    );
    let ttl = |t: &'static str| [etcd[0], etcd[1], "--etcd-ttl", t];
    assert_eq!(horizon(&ttl("2s")), Duration::from_secs(3));
    assert_eq!(horizon(&ttl("5s")), Duration::from_secs(4));
}

#[test]
fn etcd_settings_are_checked() {
    let LeaseSource::Pool(e) = parse(&["--etcd", "h:1,http://g:2", "--etcd-ttl", "2s"])
        .unwrap()
        .lease
    else {
        panic!("etcd mode")
    };
    let crate::lease::StoreSpec::Etcd { config, prefix } = &e.store else {
        panic!("etcd mode")
    };
    assert_eq!(config.access.endpoints, ["http://h:1", "http://g:2"]);
    assert_eq!(config.ttl, Duration::from_secs(2));
    assert_eq!(prefix, "/idcar");
    assert_eq!(e.pool_size, 64);
    for (bad, says) in [
        (&["--etcd", "h:1", "--etcd-ttl", "1s"][..], "--etcd-ttl"),
        (&["--etcd", "h:1", "--etcd-ttl", "2500ms"], "whole seconds"),
        (
            &["--etcd", "h:1", "--etcd-prefix", "/a//b"],
            "--etcd-prefix",
        ),
        (
            &[
                "--etcd",
                "h:1",
                "--etcd-tls-cert",
                "c.pem",
                "--etcd-tls-key",
                "k.pem",
            ],
            "--etcd-tls-ca",
        ),
        (
            &["--pool-size", "3"],
            "--pool-size needs --zk, --etcd or --kube",
        ),
    ] {
        let err = parse(bad).unwrap_err().to_string();
        assert!(err.contains(says), "{bad:?}: {err}");
    }
}

#[test]
fn the_digest_credential_never_shows_in_debug_output() {
    let argv = ["idcar", "serve", "--zk", "h:1", "--zk-auth", "idcar:s3cret"];
    let Command::Serve(a) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    assert!(!format!("{a:?}").contains("s3cret"));
    let c = ServeConfig::from_args(&a, 0).unwrap();
    assert!(!format!("{c:?}").contains("s3cret"));
}

#[test]
fn slots_and_the_ordinal_preference_are_checked() {
    let zk = ["--zk", "h:1"];
    let slots = |extra: &[&str]| match parse(&[&zk[..], extra].concat()).map(|c| c.lease) {
        Ok(LeaseSource::Pool(z)) => Ok((z.slots, z.prefer)),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e.0),
    };
    assert_eq!(slots(&[]), Ok((1, None)));
    assert_eq!(
        slots(&["--slots", "4", "--generator-id", "8"]),
        Ok((4, Some(8)))
    );
    for bad in [
        &["--slots", "0"][..],
        &["--slots", "17"],
        &["--slots", "5", "--pool-size", "4"],
    ] {
        let e = slots(bad).unwrap_err();
        assert!(e.contains("--slots must be between 1 and"), "{bad:?}: {e}");
    }
    let e = parse(&["--slots", "2"]).unwrap_err().0;
    assert!(e.contains("--slots needs --zk, --etcd or --kube"), "{e}");
    let e = parse(&["--prefer-ordinal", "--pod-name", "ids-2"])
        .unwrap_err()
        .0;
    assert!(
        e.contains("--prefer-ordinal needs --zk, --etcd or --kube"),
        "{e}"
    );
    // The ordinal from --pod-index, else from the pod name; times --slots.
    let ord = |extra: &[&str]| slots(&[&["--prefer-ordinal"][..], extra].concat());
    assert_eq!(
        ord(&["--pod-index", "3", "--pod-name", "x-9"]),
        Ok((1, Some(3)))
    );
    assert_eq!(
        ord(&["--pod-name", "ids-5", "--slots", "2"]),
        Ok((2, Some(10)))
    );
    // An empty --pod-index (the label missing before Kubernetes 1.28) falls back to the name.
    assert_eq!(
        ord(&["--pod-index", "", "--pod-name", "ids-4"]),
        Ok((1, Some(4)))
    );
    let e = ord(&["--pod-index", "three"]).unwrap_err();
    assert!(e.contains("--pod-index/IDCAR_POD_INDEX"), "{e}");
    // Outside the pool: no preference (any free slot), not an error.
    assert_eq!(ord(&["--pod-name", "ids-70"]), Ok((1, None)));
    assert_eq!(
        ord(&["--pod-name", "ids-31", "--slots", "2", "--pool-size", "63"]),
        Ok((2, None))
    );
    assert_eq!(
        ord(&["--pod-name", "ids-4294967295", "--slots", "16"]),
        Ok((16, None))
    );
    for name in ["ids", "ids-", "ids-x1", "3"] {
        let e = ord(&["--pod-name", name]).unwrap_err();
        assert!(e.contains("--prefer-ordinal: no ordinal"), "{name}: {e}");
    }
    // A preference, never with a static slot besides.
    let argv = [
        "idcar",
        "serve",
        "--zk",
        "h:1",
        "--prefer-ordinal",
        "--generator-id",
        "1",
    ];
    assert!(Cli::try_parse_from(argv).is_err());
}

#[test]
fn the_layout_help_gives_each_layout_end_at_its_default_parameters() {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let serve = cmd.find_subcommand_mut("serve").unwrap();
    let help = serve.render_long_help().to_string();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for e in crate::layout::LAYOUTS {
        let l = (e.build)(&crate::layout::LayoutParams::default()).unwrap();
        let end = crate::layout::end_date(&l.scheme());
        assert!(help.contains(&end), "{}: {end} not in\n{help}", e.name);
    }
}
