//! The checked-in code is exactly what `proto/` generates: regenerated here with the one
//! configuration idcar uses (client side only), compared file by file. After changing the
//! protos (or the generator's version), `IDCAR_REGENERATE=1 cargo test -p idcar-etcd-api`
//! writes the new code. Needs `protoc` (Debian: protobuf-compiler, libprotobuf-dev; the
//! test command's `tests/ensure-deps.sh` installs it).

use std::path::Path;

/// The first line of every generated file.
const HEADER: &str =
    "// @generated from crates/etcd-api/proto/ by tests/generated.rs — do not edit.\n";

#[test]
fn the_checked_in_code_is_what_the_protos_generate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let protos = root.join("proto");
    let out = tempfile::tempdir().expect("a temporary directory");
    tonic_prost_build::configure()
        .build_server(false)
        .out_dir(out.path())
        .compile_protos(&[protos.join("etcd/api/etcdserverpb/rpc.proto")], std::slice::from_ref(&protos))
        .unwrap_or_else(|e| {
            panic!("cannot generate etcd's API (is protoc installed? apt-get install protobuf-compiler libprotobuf-dev): {e}")
        });
    let regenerate = std::env::var_os("IDCAR_REGENERATE").is_some();
    let mut stale = Vec::new();
    for pkg in ["etcdserverpb", "mvccpb", "authpb"] {
        let generated = std::fs::read_to_string(out.path().join(format!("{pkg}.rs")))
            .unwrap_or_else(|e| panic!("{pkg}.rs was not generated: {e}"));
        let want = format!("{HEADER}{generated}");
        let path = root.join("src").join(format!("{pkg}.rs"));
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            if regenerate {
                std::fs::write(&path, &want).expect("the new code is written");
            }
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty() || regenerate,
        "the checked-in code differs from what the protos generate: {stale:?}; \
         regenerate with IDCAR_REGENERATE=1 cargo test -p idcar-etcd-api"
    );
}
